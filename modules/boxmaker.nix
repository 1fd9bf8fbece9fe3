# nixosModules.boxmaker: Boxmaker on NixOS.
#
# Invariant: every user, uid, group, subordinate range, home, path, mode,
# network rule and hardening setting comes from ./deployment.json, the file
# pkg/host/units generates from the layout table (docs/units.md); this file maps
# that schema onto NixOS options and substitutes its placeholders exactly
# as bxctl install does (docs/nix.md's table), restating none of it. Each
# role is a hardened system unit of its own user with its image's root
# filesystem (a store path built by ../images from the same definition as
# the image) as RootDirectory=; only brokerd runs rootless Podman, and the
# tool image is loaded into it. What the module adds is what NixOS needs
# and the schema cannot say: the store paths, the addresses each role may
# reach (typed options), the encrypted credentials' paths (an optional
# credential, Honcho's key, is loaded by its unit only when given), and two oneshot
# units (the role configs and users.toml into @config@; the tool image
# into brokerd's Podman). Secrets never enter the store: a secret in
# `settings` or in an environment (file) of a Boxmaker unit is refused.
{ config, lib, pkgs, ... }:

let
  inherit (lib) mkOption types;
  cfg = config.services.boxmaker;
  deployment = builtins.fromJSON (builtins.readFile ./deployment.json);
  toml = pkgs.formats.toml { };
  # The roots and images from the system's own pkgs and this module's
  # package, so the owner's closure has one nixpkgs and the host's
  # architecture; nothing of them is read while evaluating.
  built = import ../images { inherit pkgs lib; package = cfg.package; };

  roles = map (u: u.role) deployment.users;
  userOf = role: lib.findFirst (u: u.role == role) null deployment.users;
  unitName = u: lib.removeSuffix ".service" u.name;
  credentialNames = map (c: c.name) deployment.credentials;
  podman = "${config.virtualisation.podman.package}/bin/podman";
  storePrefix = builtins.storeDir + "/";

  # The image without a user of its own (the tool image) is brokerd's: the
  # one role that drives tool containers, in its own rootless Podman.
  toolImages = lib.filter (i: userOf i.role == null) deployment.images;
  podmanUsers = lib.filter (u: u.linger && u.subUidCount > 0) deployment.users;

  # --- addresses: what bxctl install's --llama, --mattermost-net and
  # --honcho-net are, and the same refusal of a name for an address.
  octet = s: builtins.match "[0-9]{1,3}" s != null && lib.toInt s <= 255;
  isV4 = s: let p = lib.splitString "." s; in builtins.length p == 4 && lib.all octet p;
  # An IPv6 address: hex digits and colons (an embedded IPv4 tail
  # allowed), at least one colon; a name has none.
  isV6 = s: builtins.match "[0-9a-fA-F:]*:[0-9a-fA-F:]*" s != null
    || (let m = builtins.match "([0-9a-fA-F:]*:)([0-9.]+)" s; in m != null && isV4 (builtins.elemAt m 1));
  isPrefix = s: let m = builtins.match "([^/]+)/([0-9]{1,3})" s; in
    m != null && (let a = builtins.elemAt m 0; n = lib.toInt (builtins.elemAt m 1); in
      (isV4 a && n <= 32) || (isV6 a && n <= 128));
  isAddr = s: isV4 s || isV6 s || isPrefix s;
  # llama-server's ip:port (or [v6]:port): inferproxy may reach that host.
  llamaParts = let
    m4 = builtins.match "([0-9.]+):([0-9]{1,5})" cfg.llamaServer;
    m6 = builtins.match "[[]([0-9a-fA-F:.]+)[]]:([0-9]{1,5})" cfg.llamaServer;
  in if m4 != null && isV4 (builtins.head m4) then m4 else if m6 != null && isV6 (builtins.head m6) then m6 else null;
  llamaOK = llamaParts != null && (let p = lib.toInt (builtins.elemAt llamaParts 1); in p >= 1 && p <= 65535);
  badAddrs = lib.filter (a: !isAddr a) (cfg.mattermostAddresses ++ cfg.honchoAddresses);
  # @net:<role>@ of each role with a network, as bxctl install's Values.
  net = {
    inferproxy = if llamaOK then builtins.head llamaParts else cfg.llamaServer;
    gatewayd = lib.concatStringsSep " " cfg.mattermostAddresses;
    memoryd = lib.concatStringsSep " " cfg.honchoAddresses;
  };

  # --- placeholders: each value found in deployment.json, by its kind.
  binRoot = name: lib.findFirst (i: i.binary == name && cfg.roots ? ${i.role}) null deployment.images;
  valueOf = ph: let
    m = builtins.match "@([a-z]+)(:([A-Za-z0-9_-]+))?@" ph;
    kind = if m == null then null else builtins.elemAt m 0;
    arg = if m == null then null else builtins.elemAt m 2;
  in
    if ph == "@podman@" then podman
    else if ph == "@llama@" then cfg.llamaServer
    else if ph == "@model@" then cfg.model
    else if ph == "@state@" then deployment.stateDir
    # The daemons check their config against the layout there.
    else if ph == "@config@" then "${deployment.stateDir}/config"
    # An image's ID is known only once the image is built: unless the
    # owner gave it, the placeholder stays and boxmaker-config puts the
    # ID in when it runs, read from the image's idFile (no evaluation
    # ever builds an image: no import-from-derivation).
    else if kind == "image" && cfg.images ? ${arg} then (if cfg.images.${arg}.id != null then cfg.images.${arg}.id else ph)
    else if kind == "root" && cfg.roots ? ${arg} then "${cfg.roots.${arg}}"
    # A host-run role's binary is its image root's, as bxctl install does.
    else if kind == "bin" && binRoot arg != null then "${cfg.roots.${(binRoot arg).role}}/bin/${arg}"
    else if kind == "net" && net ? ${arg} then net.${arg}
    else if kind == "credential" && cfg.credentials ? ${arg} then cfg.credentials.${arg}
    else null;
  # Each placeholder is substituted where it stands; one without a value
  # is left as it is and refused by an assertion below.
  subst = s: lib.concatMapStrings (p:
    if builtins.isList p then (let v = valueOf (builtins.head p); in if v == null then builtins.head p else v) else p)
    (builtins.split "(@[^@[:space:]]*@)" s);
  placeholdersIn = s: map builtins.head (lib.filter builtins.isList (builtins.split "(@[^@[:space:]]*@)" s));

  unitStrings = lib.concatMap (u: lib.concatLists (lib.mapAttrsToList (_: sec: lib.concatLists (builtins.attrValues sec)) u.sections)) deployment.units;
  fileStrings = lib.concatMap (f: [ f.path f.owner f.group f.text ]) (deployment.files ++ deployment.configs);
  allPlaceholders = lib.unique (lib.concatMap placeholdersIn (unitStrings ++ deployment.tmpfiles ++ fileStrings));
  missing = lib.filter (p: valueOf p == null) allPlaceholders;
  missingCreds = lib.filter (p: lib.hasPrefix "@credential:" p) missing;
  missingOther = lib.filter (p: !(lib.hasPrefix "@credential:" p)) missing;

  # An optional credential (Honcho's key) is in no unit of the file: given
  # one, its unit gains the credential's `load` value, as bxctl install
  # adds it (pkg/host/units.Table with the credential given).
  loadsOf = u: map (c: c.load) (lib.filter (c: c.optional && c.unit == u.name && cfg.credentials ? ${c.name}) deployment.credentials);
  serviceOf = u: let s = u.sections.Service or { }; extra = loadsOf u; in
    if extra == [ ] then s else s // { LoadCredentialEncrypted = (s.LoadCredentialEncrypted or [ ]) ++ extra; };

  # A key systemd repeats is a list; any other is its one value as a
  # string: nixpkgs' checkService compares Type= and Restart= with
  # `elem` on the raw value (nixos/lib/systemd-lib.nix assertValueOneOf),
  # and its unitOption merges lists by concatenation and strings by
  # equality (nixos/lib/systemd-unit-options.nix).
  repeatable = deployment.repeatable or { };
  shaped = section: lib.mapAttrs (k: vs:
    if lib.elem k (repeatable.${section} or [ ]) then map subst vs
    else if builtins.length vs == 1 then subst (builtins.head vs)
    else throw "services.boxmaker: deployment.json gives [${section}] ${k} ${toString (builtins.length vs)} values but systemd takes it once; see docs/runbook.md#nix-deployment-version");

  unitFor = u: {
    unitConfig = shaped "Unit" (u.sections.Unit or { });
    serviceConfig = shaped "Service" (serviceOf u);
    wantedBy = u.sections.Install.WantedBy or [ ];
    requiredBy = u.sections.Install.RequiredBy or [ ];
    # A switch that changes the role's config or users.toml restarts it
    # (boxmaker-config has rewritten them by then: it is ordered before).
    restartTriggers = map (f: f.src) (lib.filter (f: f.for == null || f.for == u.role) configSources);
  };
  roleUnits = map (u: u.name) deployment.units;

  # --- the role configs and users.toml, written where the daemons read
  # them (the layout's modes), before any role starts. A role's config is
  # its first config (deployment.json's, as bxctl up writes it) with the
  # owner's `settings` over it, key by key.
  roleOfConfig = f: lib.removeSuffix ".toml" (baseNameOf f.path);
  firstSettings = lib.listToAttrs (map (f: lib.nameValuePair (roleOfConfig f)
    (lib.mapAttrs (_: lib.mkDefault) (builtins.fromTOML (subst f.text)))) (lib.filter (f: f.text != "") deployment.configs));
  # A role with no first config (gatewayd's needs the owner's details) and
  # no settings has no config; one whose first config sets no key
  # (memoryd's: every path is the layout table's) has an empty one.
  unconfigured = map roleOfConfig (lib.filter (f: f.text == "" && (cfg.settings.${roleOfConfig f} or { }) == { }) deployment.configs);
  configSources = map (f: f // {
    for = roleOfConfig f;
    src = toml.generate "${roleOfConfig f}.toml" cfg.settings.${roleOfConfig f};
  }) (lib.filter (f: !(lib.elem (roleOfConfig f) unconfigured)) deployment.configs)
    ++ map (f: f // { for = null; src = pkgs.writeText (baseNameOf f.path) f.text; }) deployment.files;
  # The images whose ID boxmaker-config puts into the configs when it
  # runs: those a config names by placeholder and the owner gave no ID.
  runtimeIds = lib.filter (r: cfg.images.${r}.id == null && lib.elem "@image:${r}@" allPlaceholders) (builtins.attrNames cfg.images);
  idFileOf = r: let f = cfg.images.${r}.idFile; in
    # Neither given: an assertion below refuses the system.
    if f == null then "/nonexistent/${r}-id" else "${f}";
  toolPath = lib.makeBinPath [ pkgs.coreutils pkgs.gnugrep pkgs.gnused ];
  # The two scripts the module's own units run (./install-config.sh,
  # ./load-image.sh; checks/nix runs them), with their tools' PATH.
  installer = pkgs.writeShellScriptBin "boxmaker-install-config" ("PATH=${toolPath}\n" + builtins.readFile ./install-config.sh);
  idArgs = lib.concatMapStrings (r: " ${r}=${idFileOf r}") runtimeIds;
  configUnit = {
    unitConfig = {
      Description = "Boxmaker: the role configs and users.toml into ${deployment.stateDir}/config";
      After = [ "systemd-tmpfiles-setup.service" ];
      Before = roleUnits;
    };
    requiredBy = roleUnits;
    serviceConfig = {
      Type = "oneshot";
      RemainAfterExit = "yes";
      # A oneshot unit is the one kind that may repeat ExecStart=.
      ExecStart = map (f: "${installer}/bin/boxmaker-install-config ${f.mode} ${subst f.owner} ${subst f.group} ${f.src} ${subst f.path}${idArgs}") configSources;
    };
  };

  # --- the tool image into brokerd's rootless Podman (nothing is pulled),
  # its ID checked, before brokerd starts. The ID is the owner's, or read
  # from the image's idFile when the unit runs.
  # Rootless `podman load` maps the image's ids through brokerd's
  # subordinate ranges with the setuid newuidmap/newgidmap, which NixOS
  # has only as wrappers in /run/wrappers/bin: nixpkgs' podman module
  # wraps podman with "/run/wrappers" among its extraPackages ("setuid
  # shadow", nixos/modules/virtualisation/podman/default.nix), and the
  # loader's PATH names it as well, so the loader finds them either way.
  loader = pkgs.writeShellScriptBin "boxmaker-load-image" ("PATH=${toolPath}:/run/wrappers/bin\nPODMAN=${podman}\n" + builtins.readFile ./load-image.sh);
  loadUnit = img: let
    u = builtins.head podmanUsers;
    image = cfg.images.${img.role};
    consumers = map (x: x.name) (lib.filter (x: x.role == u.role) deployment.units);
    idArg = if image.id != null then "--id ${image.id}" else "--id-file ${idFileOf img.role}";
  in lib.nameValuePair "${img.name}-image" {
    unitConfig = {
      Description = "Boxmaker: load ${img.name} into ${u.name}'s Podman storage";
      After = [ "user@${toString u.uid}.service" ];
      Requires = [ "user@${toString u.uid}.service" ];
      Before = consumers;
    };
    requiredBy = consumers;
    serviceConfig = {
      Type = "oneshot";
      RemainAfterExit = "yes";
      User = u.name;
      Group = u.name;
      ExecStart = [ "${loader}/bin/boxmaker-load-image ${image.stream} ${idArg}" ];
    };
    environment = { HOME = u.home; XDG_RUNTIME_DIR = "/run/user/${toString u.uid}"; };
  };

  # --- secrets: keys of a role config whose value is a secret, and the one
  # form a secret may take there: a credential of the deployment's list.
  secretKey = k: builtins.match "(.*_)?(token|key|secret|password|passphrase)" (lib.toLower k) != null;
  secretsIn = path: v:
    if builtins.isAttrs v then lib.concatLists (lib.mapAttrsToList (k: x:
      if secretKey k && !builtins.isAttrs x then [ { path = path ++ [ k ]; value = x; } ] else secretsIn (path ++ [ k ]) x) v)
    else if builtins.isList v then lib.concatMap (secretsIn path) v
    else [ ];
  allSecrets = lib.concatMap (role: secretsIn [ role ] cfg.settings.${role}) roles;
  credentialRef = v: if builtins.isString v then builtins.match "credential:([A-Za-z0-9_.-]+)" v else null;
  badSecrets = lib.filter (s: credentialRef s.value == null) allSecrets;
  refsIn = secrets: lib.concatMap (s: let r = credentialRef s.value; in lib.optional (r != null) (builtins.head r)) secrets;
  refs = refsIn allSecrets;
  # A credential reaches only its own role's unit, so a role's settings
  # may name only its own; and one given that its role's settings do not
  # name would be loaded for nothing (a forgotten `key`: memoryd would
  # talk to Honcho without it).
  credOf = name: lib.findFirst (c: c.name == name) null deployment.credentials;
  refsOf = role: refsIn (secretsIn [ role ] cfg.settings.${role});
  foreignRefs = lib.concatMap (role: map (n: "settings.${role} names ${n}, which is ${(credOf n).role}'s")
    (lib.filter (n: credOf n != null && (credOf n).role != role) (refsOf role))) roles;
  unusedCreds = lib.filter (n: credOf n != null && !(lib.elem n (refsOf (credOf n).role))) (builtins.attrNames cfg.credentials);

  ourUnits = map unitName deployment.units ++ [ "boxmaker-config" ] ++ map (i: "${i.name}-image") toolImages;
  svc = name: config.systemd.services.${name};
  envFileUnits = lib.filter (n: (svc n).serviceConfig ? EnvironmentFile) ourUnits;
  envSecret = n: lib.any secretKey (builtins.attrNames (svc n).environment)
    || lib.any (e: secretKey (builtins.head (lib.splitString "=" e))) ((svc n).serviceConfig.Environment or [ ]);
  envSecretUnits = lib.filter envSecret ourUnits;
in
{
  options.services.boxmaker = {
    enable = lib.mkEnableOption "Boxmaker, the personal agent harness (each role a hardened system unit of its own user; brokerd's tool containers in its rootless Podman)";

    settings = mkOption {
      description = ''
        Each role's config (`<role>.toml`, written with pkgs.formats.toml into
        the store, so world-readable, and installed into
        /var/lib/boxmaker/config with the layout's mode): never a secret. A
        secret key's value must be `credential:NAME`, a name of
        `services.boxmaker.credentials`.
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
        string so Nix never copies it into the store, exactly for the
        credentials its role's settings name (`"credential:NAME"`). An
        optional one is loaded by its unit only when given here. Names:
        ${lib.concatMapStringsSep ", " (c: "${c.name} (${c.doc}${lib.optionalString c.optional "; optional"})") deployment.credentials}.
      '';
      default = { };
      type = types.attrsOf (types.strMatching "/.+");
    };

    model = mkOption {
      description = "The model's name for loopd's first config (bxctl install's --model).";
      type = types.str;
      default = "default";
    };
    llamaServer = mkOption {
      description = "llama-server's address, ip:port or [ipv6]:port (not a name: inferproxy's unit allows exactly that host).";
      type = types.str;
      example = "100.64.0.7:8080";
    };
    mattermostAddresses = mkOption {
      description = "The addresses or prefixes gatewayd may reach (Mattermost's and the resolver's), never names.";
      type = types.listOf types.str;
      default = [ ];
      example = [ "100.64.0.8" "100.100.100.100" ];
    };
    honchoAddresses = mkOption {
      description = "The addresses or prefixes memoryd may reach (Honcho's; none by default), never names.";
      type = types.listOf types.str;
      default = [ ];
    };

    # State stays where the layout table puts it: five users share it,
    # each entry with its own owner and mode, which systemd's
    # StateDirectory= (one owner per unit, as nixpkgs' modules use it)
    # cannot express, and the daemons, the units' mounts, the tmpfiles
    # rules and the first configs all derive from that one path.
    stateDir = mkOption {
      description = "Where Boxmaker's state lives (pkg/host/units.StateDir, the layout table's); read-only: see docs/nix.md.";
      type = types.str;
      default = deployment.stateDir;
      readOnly = true;
    };

    # As nixpkgs' service modules name theirs (mkPackageOption in e.g.
    # nixos/modules/virtualisation/podman/default.nix): the binaries
    # everything else is built from.
    package = mkOption {
      description = "Boxmaker's binaries (bin/gatewayd, loopd, inferproxy, brokerd, memoryd, toolkit, bxctl), from which the roots and images are built.";
      type = types.package;
      default = pkgs.boxmaker or (import ../nix { inherit pkgs; }).package;
      defaultText = lib.literalExpression "pkgs.boxmaker (the flake's overlay) or (import ../nix { inherit pkgs; }).package";
    };
    roots = mkOption {
      description = "Each role's root filesystem (../images `roots`), the RootDirectory= of its unit; by default built from the system's pkgs and `package`.";
      type = types.attrsOf types.package;
      default = built.roots;
      defaultText = lib.literalExpression "(import ../images { inherit pkgs; package = config.services.boxmaker.package; }).roots";
    };
    images = mkOption {
      description = ''
        Each image's stream script (dockerTools.streamLayeredImage) and its ID
        (the config digest, sha256:<64 hex>): `id` if you know it, otherwise
        `idFile`, a file in the built image's output holding it, read by the
        units when they run (evaluating the system never builds an image).
        The module loads the tool image into brokerd's Podman.
      '';
      type = types.attrsOf (types.submodule {
        options = {
          stream = mkOption { type = types.either types.package types.str; description = "The image's stream script."; };
          id = mkOption { type = types.nullOr (types.strMatching "sha256:[0-9a-f]{64}"); default = null; description = "The image's ID, if known at evaluation."; };
          idFile = mkOption { type = types.nullOr (types.either types.package types.str); default = null; description = "A file holding the image's ID, read at run time."; };
        };
      });
      default = built.images;
      defaultText = lib.literalExpression "(import ../images { inherit pkgs; package = config.services.boxmaker.package; }).images";
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
        assertion = lib.all (n: lib.elem n credentialNames) (builtins.attrNames cfg.credentials ++ refs);
        message = "services.boxmaker: ${lib.concatStringsSep ", " (lib.subtractLists credentialNames (builtins.attrNames cfg.credentials ++ refs))} is not a credential of the deployment (${lib.concatStringsSep ", " credentialNames}); see docs/runbook.md#nix-credential-path";
      }
      {
        assertion = foreignRefs == [ ] && unusedCreds == [ ];
        message = "services.boxmaker: ${lib.concatStringsSep "; " (foreignRefs ++ map (n: "credentials.${n} is given but settings.${(credOf n).role} does not name it (\"credential:${n}\")") unusedCreds)}: a credential is loaded only by its own role's unit, and only for the setting that names it; see docs/runbook.md#nix-credential-path";
      }
      {
        assertion = lib.all (p: !(lib.hasPrefix storePrefix p)) (builtins.attrValues cfg.credentials);
        message = "services.boxmaker.credentials: a credential in the Nix store is readable by every user; keep the .cred file outside it (e.g. /etc/credstore.encrypted); see docs/runbook.md#nix-credential-path";
      }
      {
        assertion = missingCreds == [ ] && lib.all (n: cfg.credentials ? ${n}) refs;
        message = "services.boxmaker: the units or settings need credential ${lib.concatStringsSep ", " (lib.unique (map (p: lib.removeSuffix "@" (lib.removePrefix "@credential:" p)) missingCreds ++ lib.filter (n: !(cfg.credentials ? ${n})) refs))} but services.boxmaker.credentials does not say where it is; see docs/runbook.md#nix-credential-path";
      }
      {
        assertion = llamaOK && badAddrs == [ ];
        message = "services.boxmaker: ${lib.concatStringsSep ", " (lib.optional (!llamaOK) "llamaServer \"${cfg.llamaServer}\" is not ip:port" ++ map (a: "\"${a}\" is not an address or a prefix") badAddrs)}: a unit's IPAddressAllow= takes addresses only (a name would be resolved by nobody); see docs/runbook.md#nix-network";
      }
      {
        assertion = unconfigured == [ ];
        message = "services.boxmaker.settings: ${lib.concatStringsSep ", " unconfigured} has no config (deployment.json has no first config for it: it needs the owner's details, deploy/<role>.toml explains them); see docs/runbook.md#nix-config-missing";
      }
      {
        assertion = missingOther == [ ];
        message = "services.boxmaker: deployment.json holds a placeholder this module has no value for (${lib.concatStringsSep ", " missingOther}); see docs/runbook.md#nix-deployment-version";
      }
      {
        assertion = lib.all (r: cfg.images.${r}.id != null || cfg.images.${r}.idFile != null) (builtins.attrNames cfg.images);
        message = "services.boxmaker.images: ${lib.concatStringsSep ", " (lib.filter (r: cfg.images.${r}.id == null && cfg.images.${r}.idFile == null) (builtins.attrNames cfg.images))} has neither id nor idFile; see docs/runbook.md#nix-image-id";
      }
      {
        assertion = toolImages == [ ] || builtins.length podmanUsers == 1;
        message = "services.boxmaker: deployment.json has a tool image but ${toString (builtins.length podmanUsers)} users with linger and subordinate ids, not the one (brokerd) whose Podman runs it; see docs/runbook.md#nix-deployment-version";
      }
    ];

    # brokerd's rootless Podman (its user manager's podman.socket, which
    # this module enables for every user manager: docs/nix.md).
    virtualisation.podman.enable = true;

    users.users = lib.listToAttrs (map (u: lib.nameValuePair u.name ({
      isSystemUser = true;
      uid = u.uid;
      group = u.name;
      inherit (u) home createHome linger;
    } // lib.optionalAttrs (u.subUidCount > 0) {
      subUidRanges = [ { startUid = u.subUidStart; count = u.subUidCount; } ];
      subGidRanges = [ { startGid = u.subUidStart; count = u.subUidCount; } ];
    })) deployment.users);

    users.groups = lib.listToAttrs (map (u: lib.nameValuePair u.name { gid = u.gid; }) deployment.users);

    systemd.tmpfiles.rules = map subst deployment.tmpfiles;

    systemd.services = lib.listToAttrs (map (u: lib.nameValuePair (unitName u) (unitFor u)) deployment.units)
      // { boxmaker-config = configUnit; }
      // lib.listToAttrs (map loadUnit toolImages);

    services.boxmaker.settings = firstSettings;
  };
}
