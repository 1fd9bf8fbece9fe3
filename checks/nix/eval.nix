# The module-evaluation check (docs/nix.md): modules/boxmaker.nix under
# lib.evalModules with nixpkgs' lib and declarations of the handful of
# NixOS options it sets (./stubs.nix, each copied in type from the nixpkgs
# file it cites), every option forced through builtins.toJSON (a lazy
# evaluation passes type errors silently), and the negative cases, each of
# which must be refused.
#
# Run by checks/nix's TestModuleEval (nix-instantiate --eval --strict
# --json) and by the flake's checks.<system>.module-eval. `only` names one
# negative case to evaluate without tryEval, so its error text is seen.
{ lib ? import (libPath + "/lib"), libPath ? null, only ? null }:

let
  stubs = import ./stubs.nix { inherit lib; };

  # What the positive case sets: both credentials, every secret as a
  # credential reference.
  base = {
    services.boxmaker = {
      enable = true;
      credentials = {
        mattermost-token = "/etc/credstore.encrypted/mattermost-token.cred";
        honcho-key = "/etc/credstore.encrypted/honcho-key.cred";
      };
      settings.gatewayd.token = "credential:mattermost-token";
      settings.memoryd.honcho.key = "credential:honcho-key";
      settings.memoryd.honcho.url = "https://honcho.example.ts.net";
      images = stubs.images;
      binaries = stubs.binaries;
    };
  };

  eval = extra: lib.evalModules {
    modules = [ stubs.module ../../modules/boxmaker.nix base extra ];
    specialArgs = { pkgs = stubs.pkgs; };
  };

  # Everything the module sets, as plain data; toJSON forces every value.
  result = extra: let
    c = (eval extra).config;
    ours = lib.filterAttrs (n: _: lib.hasPrefix "boxmaker-" n) c.systemd.services;
    out = {
      failed = map (a: a.message) (lib.filter (a: !a.assertion) c.assertions);
      services = lib.mapAttrs (_: s: { inherit (s) unitConfig serviceConfig wantedBy requiredBy environment; }) ours;
      users = c.users.users;
      groups = c.users.groups;
      tmpfiles = c.systemd.tmpfiles.rules;
      podman = c.virtualisation.podman.enable;
      settings = c.services.boxmaker.settings;
    };
  in builtins.fromJSON (builtins.toJSON out);

  # Each must be refused: `anchor` is the runbook anchor its assertion
  # names, or "type" for a refusal by an option's type.
  negatives = [
    { name = "plain token"; anchor = "nix-secret-in-config";
      module = { services.boxmaker.settings.gatewayd.token = lib.mkForce "mm-bot-token-1234"; }; }
    { name = "env secret ref"; anchor = "nix-secret-in-config";
      module = { services.boxmaker.settings.gatewayd.token = lib.mkForce "env:MATTERMOST_TOKEN"; }; }
    { name = "file secret ref"; anchor = "nix-secret-in-config";
      module = { services.boxmaker.settings.memoryd.honcho.key = lib.mkForce "file:/var/lib/honcho.key"; }; }
    { name = "environment file"; anchor = "nix-secret-in-environment";
      module = { systemd.services.boxmaker-gatewayd.serviceConfig.EnvironmentFile = [ "/etc/boxmaker/gatewayd.env" ]; }; }
    { name = "secret variable"; anchor = "nix-secret-in-environment";
      module = { systemd.services.boxmaker-memoryd.environment.HONCHO_API_KEY = "k"; }; }
    { name = "credential in store"; anchor = "nix-credential-path";
      module = { services.boxmaker.credentials.mattermost-token = lib.mkForce "${builtins.storeDir}/0000000000000000000000000000000a-token.cred"; }; }
    { name = "unknown credential"; anchor = "nix-credential-path";
      module = { services.boxmaker.credentials.matermost-token = "/etc/credstore.encrypted/x.cred"; }; }
    { name = "credential not given"; anchor = "nix-credential-path";
      module = { services.boxmaker.credentials = lib.mkForce { mattermost-token = "/etc/credstore.encrypted/mattermost-token.cred"; }; }; }
    { name = "credential as a Nix path"; anchor = "type";
      module = { services.boxmaker.credentials.mattermost-token = lib.mkForce /etc/credstore.encrypted/mattermost-token.cred; }; }
    { name = "relative credential"; anchor = "type";
      module = { services.boxmaker.credentials.mattermost-token = lib.mkForce "token.cred"; }; }
    { name = "image by tag"; anchor = "type";
      module = { services.boxmaker.images.loopd.id = lib.mkForce "localhost/boxmaker-loopd:latest"; }; }
    { name = "misspelled option"; anchor = "type";
      module = { services.boxmaker.setings = { }; }; }
    { name = "bad Restart"; anchor = "type";
      module = { systemd.services.boxmaker-loopd.serviceConfig.Restart = lib.mkForce [ "sometimes" ]; }; }
  ];

  refused = n: let
    r = builtins.tryEval (result n.module);
  in
    if !r.success then { inherit (n) name anchor; refused = n.anchor == "type"; how = "evaluation error"; messages = [ ]; }
    else { inherit (n) name anchor; refused = n.anchor != "type" && lib.any (lib.hasInfix "#${n.anchor}") r.value.failed; how = "assertion"; messages = r.value.failed; };
in
if only != null
then result (lib.findFirst (n: n.name == only) (throw "no negative case ${only}") negatives).module
else {
  positive = result { };
  # The values the stubs stand for, so a test can substitute the
  # placeholders of deployment.json itself and compare.
  substitutions = {
    podman = "${stubs.module.options.virtualisation.podman.package.default}/bin/podman";
    config = stubs.pkgs.linkFarm "boxmaker-config" [ ];
    images = lib.mapAttrs (_: i: i.id) stubs.images;
    binaries = lib.mapAttrs (n: p: "${p}/bin/${n}") stubs.binaries;
    credentials = base.services.boxmaker.credentials;
  };
  negatives = map (n: refused n) negatives;
}
