# The module evaluated with its defaults, as on the owner's system: its
# package, roots and images built (in Nix's sense: derivations) from the
# system's pkgs by ../../images, with nixpkgs' own files (./stubs.nix).
# Every pkgs function ../../images calls makes a REAL derivation here
# (builder /bin/sh, never built), so reading anything of a build's output
# while evaluating is import-from-derivation, which checks/nix's
# TestNoImportFromDerivation refuses (allow-import-from-derivation =
# false). `plant` reads the tool image's ID file at evaluation, as the
# module once did (lib.fileContents of a build), and must be refused.
{ libPath, nixpkgs, plant ? false }:

let
  lib = import (libPath + "/lib");
  stubs = import ./stubs.nix { inherit lib; nixpkgs = /. + nixpkgs; };
  # A derivation that would run `script`; nothing here builds it.
  drv = name: script: derivation {
    inherit name;
    system = builtins.currentSystem;
    builder = "/bin/sh";
    args = [ "-c" script ];
  };
  pkgs = stubs.pkgs // {
    inherit lib;
    # what ../../images/default.nix calls
    runCommand = name: env: script: drv name (builtins.toJSON env + script);
    dockerTools.streamLayeredImage = args: drv "stream-${args.name}" (builtins.toJSON args);
    jq = drv "jq" "";
    gnutar = drv "gnutar" "";
    cacert = drv "cacert" "";
    pkgsStatic.busybox = drv "busybox" "";
    # the overlay's pkgs.boxmaker, what services.boxmaker.package defaults to
    boxmaker = drv "boxmaker" "";
  };
  base = {
    services.boxmaker = {
      enable = true;
      credentials.mattermost-token = "/etc/credstore.encrypted/mattermost-token.cred";
      settings.gatewayd.token = "credential:mattermost-token";
      llamaServer = "100.64.0.7:8080";
      mattermostAddresses = [ "100.64.0.8" ];
    };
  };
  planted = { config, ... }: {
    services.boxmaker.images = lib.mkForce (lib.mapAttrs (_: i: i // { id = lib.fileContents i.idFile; })
      (import ../../images { inherit pkgs lib; inherit (config.services.boxmaker) package; }).images);
  };
  e = lib.evalModules {
    modules = stubs.modules ++ [ ../../modules/boxmaker.nix base ] ++ lib.optional plant planted;
    specialArgs = { inherit pkgs; utils = stubs.mkUtils e.config; };
  };
  c = e.config;
  sd = (stubs.mkUtils c).systemdUtils.lib;
in
builtins.fromJSON (builtins.unsafeDiscardStringContext (builtins.toJSON {
  failed = map (a: a.message) (lib.filter (a: !a.assertion) c.assertions);
  units = lib.mapAttrs (n: s: (sd.serviceToUnit n s).text) (lib.filterAttrs (n: _: lib.hasPrefix "boxmaker-" n) c.systemd.services);
  settings = c.services.boxmaker.settings;
  roots = lib.mapAttrs (_: r: "${r}") c.services.boxmaker.roots;
  images = lib.mapAttrs (_: i: { stream = "${i.stream}"; idFile = "${i.idFile}"; }) c.services.boxmaker.images;
}))
