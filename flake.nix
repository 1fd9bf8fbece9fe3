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
      # The role roots and the images, from one definition.
      images = import ./images { inherit pkgs; inherit (built) binaries; };

      verifyDevice = pkgs.writeShellScript "verify-device" ''
        exec ${built.binaries.bxctl}/bin/bxctl verify-device "$@"
      '';

      # The module evaluated under nixpkgs' lib with its negative cases
      # (checks/nix/eval.nix), forced completely before the trivial
      # derivation that records it.
      evalResult = import ./checks/nix/eval.nix { inherit lib; };
      evalOK = evalResult.positive.failed == [ ] && lib.all (n: n.refused) evalResult.negatives;
    in
    {
      packages.${system} = built.binaries
        // lib.mapAttrs' (role: i: lib.nameValuePair "image-${role}" i.stream) images.images
        // lib.mapAttrs' (role: r: lib.nameValuePair "root-${role}" r) images.roots
        // { default = built.binaries.bxctl; };

      # The module, with the roots and images this flake's pinned nixpkgs
      # builds (the module's own defaults use the system's pkgs).
      nixosModules.boxmaker = { lib, ... }: {
        imports = [ ./modules/boxmaker.nix ];
        services.boxmaker.roots = lib.mkDefault images.roots;
        services.boxmaker.images = lib.mkDefault images.images;
      };
      nixosModules.default = self.nixosModules.boxmaker;

      apps.${system} = {
        verify-device = { type = "app"; program = "${verifyDevice}"; };
        default = self.apps.${system}.verify-device;
      };

      checks.${system} = {
        gate = built.gate;
        module-eval = assert lib.assertMsg evalOK "module-eval: ${builtins.toJSON evalResult.negatives} ${builtins.toJSON evalResult.positive.failed}";
          builtins.deepSeq evalResult (pkgs.runCommand "module-eval" { } "echo ok > $out");
        vm = import ./checks/nix/vm.nix { inherit pkgs; module = self.nixosModules.boxmaker; };
      };
    };
}
