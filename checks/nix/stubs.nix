# Declarations of the NixOS options modules/boxmaker.nix sets, for the
# module-evaluation check (./eval.nix), and a stub pkgs with what the
# module takes from it. Each declaration copies the type of the nixpkgs
# file it cites (read from NixOS/nixpkgs, 2026); defaults and rendering
# are not checked here (a full NixOS evaluation on a Nix builder does:
# docs/nix.md). Only the options the module sets or reads are declared,
# so a misspelled one fails as an undeclared option.
{ lib }:

let
  inherit (lib) mkOption types;

  # nixos/lib/systemd-lib.nix: unitNameType.
  unitNameType = types.strMatching "[a-zA-Z0-9@%:_.\\-]+[.](service|socket|device|mount|automount|swap|target|path|timer|scope|slice)";

  # nixos/lib/systemd-unit-options.nix: unitOption (repeatable options are
  # lists, concatenated; others must be equal).
  unitOption = lib.mkOptionType {
    name = "systemd option";
    merge = loc: defs:
      let defs' = lib.filterOverrides defs; in
      if builtins.isList (builtins.head defs').value
      then lib.concatMap (def:
        if builtins.typeOf def.value == "list" then def.value
        else throw "The definitions for systemd unit options should be either all lists, representing repeatable options, or all non-lists, but for the option ${lib.showOption loc}, the definitions are a mix of list and non-list ${lib.options.showDefs defs'}") defs'
      else lib.mergeEqualOption loc defs';
  };

  # nixos/lib/systemd-unit-options.nix: checkService, with systemd-lib's
  # assertValueOneOf for Type and Restart (a value is a string or a list).
  valueIn = name: allowed: cfg:
    let v = cfg.${name} or null; vs = if v == null then [ ] else lib.toList v; in
    lib.all (x: lib.elem x allowed) vs;
  checkService = cfg:
    valueIn "Type" [ "exec" "simple" "forking" "oneshot" "dbus" "notify" "notify-reload" "idle" ] cfg
    && valueIn "Restart" [ "no" "on-success" "on-failure" "on-abnormal" "on-abort" "on-watchdog" "always" ] cfg;

  serviceType = types.submodule {
    options = {
      # nixos/lib/systemd-unit-options.nix (commonUnitOptions, serviceOptions)
      description = mkOption { type = types.singleLineStr; default = ""; };
      unitConfig = mkOption { type = types.attrsOf unitOption; default = { }; };
      serviceConfig = mkOption { type = types.addCheck (types.attrsOf unitOption) checkService; default = { }; };
      wantedBy = mkOption { type = types.listOf unitNameType; default = [ ]; };
      requiredBy = mkOption { type = types.listOf unitNameType; default = [ ]; };
      restartTriggers = mkOption { type = types.listOf types.unspecified; default = [ ]; };
      environment = mkOption { type = with types; attrsOf (nullOr (oneOf [ str path package ])); default = { }; };
    };
  };

  # nixos/modules/config/users-groups.nix: subordinateUidRange, subordinateGidRange.
  subUid = { options = { startUid = mkOption { type = types.int; }; count = mkOption { type = types.int; default = 1; }; }; };
  subGid = { options = { startGid = mkOption { type = types.int; }; count = mkOption { type = types.int; default = 1; }; }; };

  # nixos/modules/config/users-groups.nix: userOpts (the options set here).
  userType = types.submodule {
    options = {
      uid = mkOption { type = with types; nullOr int; default = null; };
      isSystemUser = mkOption { type = types.bool; default = false; };
      group = mkOption { type = types.str; default = ""; };
      home = mkOption { type = types.passwdEntry types.path; default = "/var/empty"; };
      createHome = mkOption { type = types.bool; default = false; };
      subUidRanges = mkOption { type = with types; listOf (submodule subUid); default = [ ]; };
      subGidRanges = mkOption { type = with types; listOf (submodule subGid); default = [ ]; };
      linger = mkOption { type = types.nullOr types.bool; default = null; };
    };
  };
  # users-groups.nix: groupOpts.gid.
  groupType = types.submodule { options.gid = mkOption { type = with types; nullOr int; default = null; }; };

  # Store paths the stubs stand for (32 base-32 characters, as Nix makes).
  store = hash: name: "${builtins.storeDir}/${hash}-${name}";
  # A package is a derivation-shaped set: types.package turns a bare store
  # path string into a derivation with builtins.storePath, which needs the
  # path to exist.
  fakePkg = name: { type = "derivation"; inherit name; outPath = store "0000000000000000000000000000000${builtins.substring 0 1 name}" name; };

  roles = [ "gatewayd" "loopd" "inferproxy" "brokerd" "memoryd" "tool" ];
  hex = c: lib.concatStrings (lib.genList (_: c) 64);
in
{
  module = {
    options = {
      # nixos/modules/misc/assertions.nix
      assertions = mkOption { type = types.listOf types.unspecified; default = [ ]; internal = true; };
      warnings = mkOption { type = types.listOf types.str; default = [ ]; internal = true; };
      # users-groups.nix
      users.users = mkOption { type = types.attrsOf userType; default = { }; };
      users.groups = mkOption { type = types.attrsOf groupType; default = { }; };
      # nixos/modules/system/boot/systemd.nix (systemd.services)
      systemd.services = mkOption { type = types.attrsOf serviceType; default = { }; };
      # nixos/modules/system/boot/systemd/tmpfiles.nix
      systemd.tmpfiles.rules = mkOption { type = types.listOf types.str; default = [ ]; };
      # nixos/modules/virtualisation/podman/default.nix
      virtualisation.podman.enable = mkOption { type = types.bool; default = false; };
      virtualisation.podman.package = mkOption { type = types.package; default = fakePkg "podman"; };
    };
  };

  # pkgs: formats.toml's type as pkgs/pkgs-lib/formats.nix declares it;
  # generate and writeText force their input and return a fixed store path.
  pkgs = {
    formats.toml = { }: {
      type = with types; let
        valueType = oneOf [ bool int float str path (attrsOf valueType) (listOf valueType) ] // { description = "TOML value"; };
      in valueType;
      generate = name: value: builtins.deepSeq (builtins.toJSON value) (fakePkg name).outPath;
    };
    writeText = name: text: builtins.deepSeq text (fakePkg name).outPath;
    coreutils = fakePkg "coreutils";
    runtimeShell = "/bin/sh";
  };

  # Each image's stream script and an ID made of one repeated digit.
  images = lib.genAttrs roles (r: {
    stream = fakePkg "stream-${r}";
    id = "sha256:" + hex (builtins.substring 0 1 (builtins.hashString "sha256" r));
  });
  # Each role's root filesystem (images/default.nix `roots`).
  roots = lib.genAttrs [ "gatewayd" "loopd" "inferproxy" "brokerd" "memoryd" ] (r: fakePkg "boxmaker-${r}-root");
}
