# nixosModules.boxmaker: Boxmaker on NixOS.
#
# Invariant: every user, uid, group, subordinate range, path, mode,
# network and hardening setting comes from ./deployment.json, the file the
# Go layout table generates (docs/nix.md, /work contract "deployment.json");
# this file maps that schema onto NixOS options and substitutes the
# placeholders (@podman@, @image:<role>@, @bin:<name>@, @state@, @config@)
# and restates none of it. What it adds is only what NixOS needs and the
# schema cannot say: the image IDs and store paths, the role configs from
# `settings` (pkgs.formats.toml), the encrypted credentials' paths, and one
# oneshot unit per image that loads it into its user's Podman storage.
# Secrets never enter the store: a secret in `settings` or in an
# environment (file) of a Boxmaker unit is refused by an assertion.
{ config, lib, pkgs, ... }:

let
  inherit (lib) mkOption types;
  cfg = config.services.boxmaker;
  deployment = builtins.fromJSON (builtins.readFile ./deployment.json);
  toml = pkgs.formats.toml { };

  roles = map (u: u.role) deployment.users;
  userOf = role: lib.findFirst (u: u.role == role) null deployment.users;
  unitName = u: lib.removeSuffix ".service" u.name;
  credentialNames = map (c: c.name) deployment.credentials;
  imageRoles = map (i: i.role) deployment.images;
  # An image of a role without a user of its own (the tool image) is loaded
  # by brokerd, the one role that drives tool containers (design card).
  loaderOf = role: if userOf role != null then role else "brokerd";

  storePrefix = builtins.storeDir + "/";

  # The role configs: one TOML file per role in one store directory, which
  # @config@ names. The tool image's ID goes into brokerd's runner table.
  configDir = pkgs.linkFarm "boxmaker-config" (map (role: {
    name = "${role}.toml";
    path = toml.generate "${role}.toml" cfg.settings.${role};
  }) roles);

  placeholders =
    [
      { from = "@podman@"; to = "${config.virtualisation.podman.package}/bin/podman"; }
      { from = "@state@"; to = deployment.stateDir; }
      { from = "@config@"; to = "${configDir}"; }
    ]
    ++ map (role: { from = "@image:${role}@"; to = cfg.images.${role}.id; }) imageRoles
    ++ lib.mapAttrsToList (name: pkg: { from = "@bin:${name}@"; to = "${pkg}/bin/${name}"; }) cfg.binaries;
  subst = builtins.replaceStrings (map (p: p.from) placeholders) (map (p: p.to) placeholders);
  # A placeholder left after substitution is one this module does not know.
  leftover = s: builtins.match ".*(@[a-z]+(:[A-Za-z0-9_-]+)?@).*" s;

  substSection = sec: lib.mapAttrs (_: vs: map subst vs) sec;

  # Each role's encrypted credentials, as LoadCredentialEncrypted= values.
  credentialsOf = role:
    map (c: "${c.name}:${cfg.credentials.${c.name}}")
      (lib.filter (c: c.role == role && cfg.credentials ? ${c.name}) deployment.credentials);

  unitFor = u: {
    unitConfig = substSection (u.sections.Unit or { });
    serviceConfig = substSection (u.sections.Service or { })
      // lib.optionalAttrs (credentialsOf u.role != [ ]) { LoadCredentialEncrypted = credentialsOf u.role; };
    wantedBy = u.sections.Install.WantedBy or [ ];
    requiredBy = u.sections.Install.RequiredBy or [ ];
  };

  # One oneshot per image: load it into its user's rootless storage and
  # check the ID, before the unit that runs it starts (nothing is pulled).
  loadUnit = img: let
    user = userOf (loaderOf img.role);
    image = cfg.images.${img.role};
    consumers = map (u: u.name) (lib.filter (u: u.role == loaderOf img.role) deployment.units);
  in lib.nameValuePair "${img.name}-image" {
    unitConfig = {
      Description = [ "Load ${img.name} into ${user.name}'s Podman storage" ];
      After = [ "user@${toString user.uid}.service" ];
      Requires = [ "user@${toString user.uid}.service" ];
      Before = consumers;
    };
    requiredBy = consumers;
    serviceConfig = {
      Type = [ "oneshot" ];
      RemainAfterExit = [ "yes" ];
      User = [ user.name ];
      Group = [ user.name ];
      Environment = [ "XDG_RUNTIME_DIR=/run/user/${toString user.uid}" ];
      ExecStart = [
        "${pkgs.runtimeShell} -c '${image.stream} | ${config.virtualisation.podman.package}/bin/podman load'"
        "${config.virtualisation.podman.package}/bin/podman image exists ${image.id}"
      ];
    };
  };

  # Keys of a role config whose value is a secret, and the one form a
  # secret may take there: a systemd credential of the deployment's list.
  secretKey = k: builtins.match "(.*_)?(token|key|secret|password|passphrase)" (lib.toLower k) != null;
  secretsIn = path: v:
    if builtins.isAttrs v then lib.concatLists (lib.mapAttrsToList (k: x:
      if secretKey k && !builtins.isAttrs x then [ { path = path ++ [ k ]; value = x; } ] else secretsIn (path ++ [ k ]) x) v)
    else if builtins.isList v then lib.concatMap (secretsIn path) v
    else [ ];
  allSecrets = lib.concatMap (role: map (s: s // { inherit role; }) (secretsIn [ role ] cfg.settings.${role})) roles;
  credentialRef = v: if builtins.isString v then builtins.match "credential:([A-Za-z0-9_.-]+)" v else null;
  badSecrets = lib.filter (s: credentialRef s.value == null) allSecrets;
  refs = lib.concatMap (s: let r = credentialRef s.value; in lib.optional (r != null) (builtins.head r)) allSecrets;

  ourUnits = map unitName deployment.units ++ map (i: "${i.name}-image") deployment.images;
  svc = name: config.systemd.services.${name};
  envFileUnits = lib.filter (n: (svc n).serviceConfig ? EnvironmentFile) ourUnits;
  envSecret = n: lib.any secretKey (builtins.attrNames (svc n).environment)
    || lib.any (e: secretKey (builtins.head (lib.splitString "=" e))) ((svc n).serviceConfig.Environment or [ ]);
  envSecretUnits = lib.filter envSecret ourUnits;
  unitStrings = lib.concatMap (u: lib.concatLists (lib.mapAttrsToList (_: sec: lib.concatLists (builtins.attrValues sec)) u.sections)) deployment.units;
  left = lib.filter (m: m != null) (map (s: leftover (subst s)) (unitStrings ++ deployment.tmpfiles));
in
{
  options.services.boxmaker = {
    enable = lib.mkEnableOption "Boxmaker, the personal agent harness (every role a rootless Podman container of its own user)";

    settings = mkOption {
      description = ''
        Each role's config (`<role>.toml`, written with pkgs.formats.toml into
        the store, so world-readable): never a secret. A secret key's value
        must be `credential:NAME`, a name of `services.boxmaker.credentials`.
      '';
      default = { };
      type = types.submodule {
        options = lib.genAttrs roles (role: mkOption {
          type = toml.type;
          default = { };
          description = "${role}'s config (deploy/${role}.toml documents every key).";
        });
      };
    };

    credentials = mkOption {
      description = ''
        Where each encrypted credential is (`systemd-creds encrypt --name=NAME
        plain FILE`): an absolute path outside the Nix store, given as a
        string so Nix never copies it into the store. Names:
        ${lib.concatMapStringsSep ", " (c: "${c.name} (${c.doc})") deployment.credentials}.
      '';
      default = { };
      type = types.attrsOf (types.strMatching "/.+");
    };

    images = mkOption {
      description = "Each image's stream script (dockerTools.streamLayeredImage) and ID (the config digest, sha256:<64 hex>).";
      type = types.attrsOf (types.submodule {
        options = {
          stream = mkOption { type = types.either types.package types.str; };
          id = mkOption { type = types.strMatching "sha256:[0-9a-f]{64}"; };
        };
      });
      default = import ../images { inherit pkgs; };
      defaultText = lib.literalExpression "import ../images { inherit pkgs; }";
    };

    binaries = mkOption {
      description = "The Go binaries, by name, for @bin:<name>@.";
      type = types.attrsOf types.package;
      default = (import ../nix { inherit pkgs; }).binaries;
      defaultText = lib.literalExpression "(import ../nix { inherit pkgs; }).binaries";
    };
  };

  config = lib.mkIf cfg.enable {
    assertions = [
      {
        assertion = deployment.version == 1;
        message = "services.boxmaker: deployment.json is version ${toString deployment.version}, this module reads version 1; see docs/runbook.md#nix-deployment-version";
      }
      {
        assertion = badSecrets == [ ];
        message = "services.boxmaker: a secret in plain config (${lib.concatMapStringsSep ", " (s: lib.concatStringsSep "." s.path) badSecrets}): the role configs are in the world-readable Nix store, so a secret key must be \"credential:NAME\" with services.boxmaker.credentials.NAME the encrypted file; see docs/runbook.md#nix-secret-in-config";
      }
      {
        assertion = envFileUnits == [ ] && envSecretUnits == [ ];
        message = "services.boxmaker: an environment-file secret (${lib.concatStringsSep ", " (envFileUnits ++ envSecretUnits)}): a Boxmaker unit takes its secrets only through LoadCredentialEncrypted, never EnvironmentFile= or a secret variable; see docs/runbook.md#nix-secret-in-environment";
      }
      {
        assertion = lib.all (n: lib.elem n credentialNames) (builtins.attrNames cfg.credentials);
        message = "services.boxmaker.credentials: ${lib.concatStringsSep ", " (lib.subtractLists credentialNames (builtins.attrNames cfg.credentials))} is not a credential of the deployment (${lib.concatStringsSep ", " credentialNames}); see docs/runbook.md#nix-credential-path";
      }
      {
        assertion = lib.all (p: !(lib.hasPrefix storePrefix p)) (builtins.attrValues cfg.credentials);
        message = "services.boxmaker.credentials: a credential in the Nix store is readable by every user; keep the .cred file outside it (e.g. /etc/credstore.encrypted); see docs/runbook.md#nix-credential-path";
      }
      {
        assertion = lib.all (n: cfg.credentials ? ${n}) refs;
        message = "services.boxmaker: the settings refer to credential ${lib.concatStringsSep ", " (lib.filter (n: !(cfg.credentials ? ${n})) refs)} but services.boxmaker.credentials does not say where it is; see docs/runbook.md#nix-credential-path";
      }
      {
        assertion = left == [ ];
        message = "services.boxmaker: deployment.json holds a placeholder this module does not substitute (${lib.concatMapStringsSep ", " (m: builtins.elemAt m 0) left}); see docs/runbook.md#nix-deployment-version";
      }
    ];

    virtualisation.podman.enable = true;

    users.users = lib.listToAttrs (map (u: lib.nameValuePair u.name ({
      isSystemUser = true;
      uid = u.uid;
      group = u.name;
      linger = u.linger;
      subUidRanges = [ { startUid = u.subUidStart; count = u.subUidCount; } ];
      subGidRanges = [ { startGid = u.subUidStart; count = u.subUidCount; } ];
    } // lib.optionalAttrs (u ? home) { home = u.home; createHome = true; })) deployment.users);

    users.groups = lib.listToAttrs (map (u: lib.nameValuePair u.name { gid = u.gid; }) deployment.users);

    systemd.tmpfiles.rules = map subst deployment.tmpfiles;

    systemd.services = lib.listToAttrs (map (u: lib.nameValuePair (unitName u) (unitFor u)) deployment.units)
      // lib.listToAttrs (map loadUnit deployment.images);

    services.boxmaker.settings = lib.optionalAttrs (lib.elem "tool" imageRoles && lib.elem "brokerd" roles) {
      brokerd.runner.tool_image = cfg.images.tool.id;
    };
  };
}
