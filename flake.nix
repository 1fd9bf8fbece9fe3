{
  description = "Boxmaker: a sovereign personal agent harness; Go roles as OCI images and a NixOS module";

  # nixpkgs only. The lock pins nixos-unstable 0ae2bc14, whose Go is at least
  # go.mod's (nix/default.nix asserts it); docs/nix.md says why not 25.11.
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs = { self, nixpkgs }:
    let
      system = "x86_64-linux";
      pkgs = nixpkgs.legacyPackages.${system};
      lib = nixpkgs.lib;
      built = import ./nix { inherit pkgs; };
      # The role roots and the images, from one definition (the packages
      # below; the module builds its own from the system's pkgs).
      images = import ./images { inherit pkgs; inherit (built) package; };

      verifyDevice = pkgs.writeShellScript "verify-device" ''
        exec ${built.binaries.bxctl}/bin/bxctl verify-device "$@"
      '';

      # What checks.module-eval sets: checks/nix/eval.nix's positive case.
      example = {
        boot.isContainer = true;
        system.stateVersion = "25.11";
        services.boxmaker = {
          enable = true;
          credentials.mattermost-token = "/etc/credstore.encrypted/mattermost-token.cred";
          settings.gatewayd.token = "credential:mattermost-token";
          settings.memoryd.honcho.url = "https://honcho.example.ts.net";
          llamaServer = "100.64.0.7:8080";
          mattermostAddresses = [ "100.64.0.8" "100.100.100.100" ];
        };
      };
      # A whole NixOS system with the module, as nixos-rebuild evaluates
      # it (nixpkgs' own systemd.nix, top-level.nix's assertions); its
      # toplevel's derivation path forces every unit's text without
      # building anything.
      exampleSystem = lib.nixosSystem { inherit system; modules = [ self.nixosModules.boxmaker example ]; };
    in
    {
      # pkgs.boxmaker for a system that adds the overlay; the module's
      # package defaults to it when present.
      overlays.default = final: _prev: { boxmaker = (import ./nix { pkgs = final; }).package; };

      packages.${system} = built.binaries
        // lib.mapAttrs' (role: i: lib.nameValuePair "image-${role}" i.stream) images.images
        // lib.mapAttrs' (role: i: lib.nameValuePair "image-${role}-id" i.idFile) images.images
        // lib.mapAttrs' (role: r: lib.nameValuePair "root-${role}" r) images.roots
        // { boxmaker = built.package; default = built.package; };

      # The module alone: its package, roots and images default to the
      # system's own pkgs (one nixpkgs in the owner's closure, the host's
      # architecture). meta.doc as nixpkgs' modules have it
      # (nixos/modules/misc/meta.nix); no meta.maintainers: nixpkgs'
      # type accepts only entries of lib.maintainers (docs/nix.md).
      nixosModules.boxmaker = {
        imports = [ ./modules/boxmaker.nix ];
        meta.doc = ./docs/nix.md;
      };
      nixosModules.default = self.nixosModules.boxmaker;

      apps.${system} = {
        verify-device = {
          type = "app";
          program = "${verifyDevice}";
          meta.description = "Check the inference host against the recorded serving settings (bxctl verify-device)";
        };
        default = self.apps.${system}.verify-device;
      };

      devShells.${system}.default = pkgs.mkShell {
        packages = [ built.go pkgs.gopls pkgs.nix pkgs.podman pkgs.jq ];
      };

      formatter.${system} = pkgs.nixfmt;

      checks.${system} = {
        gate = built.gate;
        module-eval = builtins.seq exampleSystem.config.system.build.toplevel.drvPath
          (pkgs.runCommand "module-eval" { } "echo ok > $out");
        vm = import ./checks/nix/vm.nix { inherit pkgs; module = self.nixosModules.boxmaker; };
      };
    };
}
