# What the module-evaluation check (./eval.nix) evaluates modules/boxmaker.nix
# with: nixpkgs' OWN files for every option the module sets (`real`, from
# `nixpkgs`, a tree of nixpkgs' files: ../shared/reference/nixpkgs, whose
# README gives each file's repository and commit), and STUBS only for what
# those files reference and do not declare themselves. Every stub is marked
# STUB and names the nixpkgs file that declares the real thing. Nothing here
# declares an option the module sets but systemd.services, whose declaring
# file (nixos/modules/system/boot/systemd.nix) needs a whole pkgs; its stub
# uses nixpkgs' own type for it (nixos/lib/systemd-types.nix `services`), so
# serviceConfig is checked by nixpkgs' checkService.
{ lib, nixpkgs }:

let
  inherit (lib) mkOption types;

  # STUB (pkgs): store-path-shaped derivations, never built; only outPath
  # is used.
  fake = name: {
    type = "derivation";
    inherit name;
    outPath = "${builtins.storeDir}/00000000000000000000000000000000-${name}";
    overrideAttrs = _: fake name;
  };
  fakeShell = name: fake name // { shellPath = "/bin/${name}"; };
  pkgs = {
    # nixos/lib/systemd-lib.nix (stage2ServiceConfig's path, makeJobScript)
    coreutils = fake "coreutils";
    findutils = fake "findutils";
    gnugrep = fake "gnugrep";
    gnused = fake "gnused";
    systemd = fake "systemd";
    writeText = name: text: builtins.deepSeq text (fake name).outPath;
    writeShellScriptBin = name: text: builtins.deepSeq text (fake name);
    runCommand = name: _: _: fake name;
    buildPackages.xorg.lndir = fake "lndir";
    # nixos/modules/config/users-groups.nix (shells, the linger-users unit)
    shadow = fakeShell "shadow";
    bashInteractive = fakeShell "bash";
    fish = fakeShell "fish";
    xonsh = fakeShell "xonsh";
    zsh = fakeShell "zsh";
    libxcrypt.enabledCryptSchemeIds = [ "y" "gy" "7" "2b" "2y" "2a" "6" ];
    # nixos/modules/system/boot/systemd/tmpfiles.nix (environment.etc)
    symlinkJoin = a: fake a.name;
    writeTextFile = a: fake a.name;
    writeTextDir = name: _: fake name;
    linkFarm = name: _: fake name;
    # what the module itself reads: pkgs/pkgs-lib/formats.nix's toml
    # (its type; generate keeps the value), pkgs/stdenv's runtimeShell
    formats.toml = { }: {
      type = with types; let
        valueType = oneOf [ bool int float str path (attrsOf valueType) (listOf valueType) ] // { description = "TOML value"; };
      in valueType;
      generate = name: value: builtins.deepSeq (builtins.toJSON value) (fake name).outPath;
    };
    runtimeShell = "/bin/sh";
  };

  # STUB of nixos/lib/utils.nix (not among the stored files): systemdUtils
  # made of the same three nixpkgs files it imports; toShellPath only
  # serves the activation script, which nothing here forces.
  mkUtils = config: rec {
    systemdUtils = {
      lib = import (nixpkgs + "/nixos/lib/systemd-lib.nix") { inherit config pkgs lib; };
      unitOptions = import (nixpkgs + "/nixos/lib/systemd-unit-options.nix") { inherit systemdUtils lib; };
      types = import (nixpkgs + "/nixos/lib/systemd-types.nix") { inherit systemdUtils pkgs lib; };
    };
    toShellPath = _: throw "STUB utils.toShellPath: not evaluated here";
  };

  # STUB declarations of options the real files read or set whose own
  # nixpkgs module is not stored; each names that module.
  stubs = { config, ... }: let utils = mkUtils config; in {
    options = {
      # nixos/modules/system/boot/systemd.nix, with nixpkgs' own type
      systemd.services = mkOption { type = utils.systemdUtils.types.services; default = { }; };
      systemd.package = mkOption { type = types.package; default = pkgs.systemd; };
      systemd.globalEnvironment = mkOption { type = with types; attrsOf (nullOr (oneOf [ str path package ])); default = { }; };
      systemd.packages = mkOption { type = types.listOf types.package; default = [ ]; };
      systemd.additionalUpstreamSystemUnits = mkOption { type = types.listOf types.str; default = [ ]; };
      systemd.additionalUpstreamUserUnits = mkOption { type = types.listOf types.str; default = [ ]; };
      # nixos/modules/system/boot/systemd/sysusers.nix
      systemd.sysusers.enable = mkOption { type = types.bool; default = false; };
      # nixos/modules/system/boot/systemd/initrd.nix (set under mkIf false)
      boot.initrd.systemd.enable = mkOption { type = types.bool; default = false; };
      boot.initrd.systemd.contents = mkOption { type = types.attrsOf types.unspecified; default = { }; };
      boot.initrd.systemd.storePaths = mkOption { type = types.listOf types.unspecified; default = [ ]; };
      boot.initrd.systemd.additionalUpstreamUnits = mkOption { type = types.listOf types.str; default = [ ]; };
      boot.initrd.systemd.services = mkOption { type = types.attrsOf types.unspecified; default = { }; };
      # nixos/modules/misc/ids.nix: the names users-groups.nix reads; only
      # their uniqueness against the module's 61001-61005 matters here.
      ids.uids = mkOption { type = types.attrsOf types.int; default = { root = 0; nobody = 65534; }; };
      ids.gids = mkOption { type = types.attrsOf types.int; default = {
        root = 0; wheel = 1; tty = 3; disk = 6; lp = 7; kmem = 9; audio = 17; floppy = 18; uucp = 19;
        cdrom = 24; tape = 25; video = 26; dialout = 27; utmp = 29; adm = 55; users = 100; input = 174;
        kvm = 302; render = 303; sgx = 304; shadow = 318; nixbld = 30000; nogroup = 65534; }; };
      # nixos/modules/config/shells-environment.nix
      users.defaultUserShell = mkOption { type = types.either types.path types.shellPackage; default = pkgs.bashInteractive; };
      # nixos/modules/system/activation/activation-script.nix, config/system-path.nix, system/etc/etc.nix
      system.activationScripts = mkOption { type = types.attrsOf types.unspecified; default = { }; };
      environment.systemPackages = mkOption { type = types.listOf types.unspecified; default = [ ]; };
      environment.profiles = mkOption { type = types.listOf types.str; default = [ ]; };
      environment.etc = mkOption { type = types.attrsOf types.unspecified; default = { }; };
      # nixos/modules/services/misc/nix-daemon.nix (tmpfiles.nix reads it)
      nix.enable = mkOption { type = types.bool; default = true; };
      # nixos/modules/virtualisation/podman/default.nix (the module sets enable, reads package)
      virtualisation.podman.enable = mkOption { type = types.bool; default = false; };
      virtualisation.podman.package = mkOption { type = types.package; default = fake "podman"; };
    };
  };

  roles = [ "gatewayd" "loopd" "inferproxy" "brokerd" "memoryd" "tool" ];
  hex = c: lib.concatStrings (lib.genList (_: c) 64);
in
{
  inherit pkgs mkUtils fake;
  # nixpkgs' own modules, then the stubs.
  modules = [
    (nixpkgs + "/nixos/modules/misc/assertions.nix")
    (nixpkgs + "/nixos/modules/config/users-groups.nix")
    (nixpkgs + "/nixos/modules/system/boot/systemd/tmpfiles.nix")
    stubs
  ];
  # Each image's stream script and ID file (what images/default.nix
  # gives: the ID is read from the file when a unit runs).
  images = lib.genAttrs roles (r: { stream = fake "stream-${r}"; idFile = fake "stream-${r}-id"; });
  # The same with the IDs given, one repeated digit each.
  imageIDs = lib.genAttrs roles (r: "sha256:" + hex (builtins.substring 0 1 (builtins.hashString "sha256" r)));
  # Each role's root filesystem (images/default.nix `roots`).
  roots = lib.genAttrs [ "gatewayd" "loopd" "inferproxy" "brokerd" "memoryd" ] (r: fake "boxmaker-${r}-root");
  # The module's package (nix/default.nix `package`), never built here.
  package = fake "boxmaker";
}
