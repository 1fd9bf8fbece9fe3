# The module-evaluation check (docs/nix.md): modules/boxmaker.nix under
# lib.evalModules with nixpkgs' lib and nixpkgs' OWN files for the options
# it sets (./stubs.nix: assertions.nix, users-groups.nix, tmpfiles.nix and
# systemd-lib/-unit-options/-types from `nixpkgs`, stubs only for what they
# reference), every option forced through builtins.toJSON and every unit
# rendered by systemd-lib's serviceToUnit (a lazy evaluation passes type
# errors silently; rendering runs nixpkgs' checkService), and the negative
# cases, each of which must be refused.
#
# Run by checks/nix's TestModuleEval (nix-instantiate --eval --strict
# --json) with libPath = ../shared/reference/nixpkgs-lib and nixpkgs =
# ../shared/reference/nixpkgs. `only` names one negative case to evaluate
# without tryEval, so its error text is seen.
{ lib ? import (libPath + "/lib"), libPath ? null, nixpkgs, only ? null }:

let
  stubs = import ./stubs.nix { inherit lib; nixpkgs = /. + nixpkgs; };

  # What the positive case sets: the deployment's one credential that is
  # not optional, every secret as a credential reference, addresses for
  # each role's network, and Honcho with its auth off (no key).
  base = {
    services.boxmaker = {
      enable = true;
      credentials.mattermost-token = "/etc/credstore.encrypted/mattermost-token.cred";
      settings.gatewayd.token = "credential:mattermost-token";
      settings.memoryd.honcho.url = "https://honcho.example.ts.net";
      llamaServer = "100.64.0.7:8080";
      mattermostAddresses = [ "100.64.0.8" "100.100.100.100" ];
      honchoAddresses = [ "100.64.0.9/32" "fd7a:115c:a1e0::9" ];
      images = stubs.images;
      roots = stubs.roots;
      package = stubs.package;
    };
  };
  # The images with their IDs given at evaluation instead of ID files.
  withIDs = { services.boxmaker.images = lib.mkForce (lib.mapAttrs (r: i: { inherit (i) stream; id = stubs.imageIDs.${r}; }) stubs.images); };

  # The second positive case: Honcho with its key, the optional credential.
  honchoKey = "/etc/credstore.encrypted/honcho-key.cred";
  withKey = {
    services.boxmaker.credentials.honcho-key = honchoKey;
    services.boxmaker.settings.memoryd.honcho.key = "credential:honcho-key";
  };

  eval = extra: let e = lib.evalModules {
    modules = stubs.modules ++ [ ../../modules/boxmaker.nix base extra ];
    specialArgs = { pkgs = stubs.pkgs; utils = stubs.mkUtils e.config; };
  }; in e;

  # Everything the module sets, as plain data; toJSON forces every value.
  result = extra: let
    c = (eval extra).config;
    sd = (stubs.mkUtils c).systemdUtils.lib;
    ours = lib.filterAttrs (n: _: lib.hasPrefix "boxmaker-" n) c.systemd.services;
    out = {
      failed = map (a: a.message) (lib.filter (a: !a.assertion) c.assertions);
      # As nixos/modules/system/boot/systemd.nix renders each service.
      services = lib.mapAttrs (n: s: { inherit (s) unitConfig serviceConfig wantedBy requiredBy environment restartTriggers; text = (sd.serviceToUnit n s).text; }) ours;
      users = c.users.users;
      groups = c.users.groups;
      tmpfiles = c.systemd.tmpfiles.rules;
      podman = c.virtualisation.podman.enable;
      settings = c.services.boxmaker.settings;
      images = c.services.boxmaker.images;
      roots = c.services.boxmaker.roots;
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
    { name = "credential as a Nix path"; anchor = "type";
      module = { services.boxmaker.credentials.mattermost-token = lib.mkForce /etc/credstore.encrypted/mattermost-token.cred; }; }
    { name = "relative credential"; anchor = "type";
      module = { services.boxmaker.credentials.mattermost-token = lib.mkForce "token.cred"; }; }
    { name = "image by tag"; anchor = "type";
      module = { services.boxmaker.images.tool.id = "localhost/boxmaker-tool:latest"; }; }
    { name = "image without ID"; anchor = "nix-image-id";
      module = { services.boxmaker.images.tool.idFile = lib.mkForce null; }; }
    # What nixpkgs' checkService (systemd-unit-options.nix) refuses: a
    # one-element list for a single-valued key, as the module once set.
    { name = "one-element Type list"; anchor = "type";
      module = { systemd.services.boxmaker-loopd.serviceConfig.Type = lib.mkForce [ "exec" ]; }; }
    { name = "one-element Restart list"; anchor = "type";
      module = { systemd.services.boxmaker-config.serviceConfig.Restart = [ "on-failure" ]; }; }
    { name = "Type list added to the string"; anchor = "type";
      module = { systemd.services.boxmaker-gatewayd.serviceConfig.Type = [ "exec" ]; }; }
    { name = "misspelled option"; anchor = "type";
      module = { services.boxmaker.setings = { }; }; }
    { name = "bad Restart"; anchor = "type";
      module = { systemd.services.boxmaker-loopd.serviceConfig.Restart = lib.mkForce "sometimes"; }; }
    { name = "honcho-key credential"; anchor = "nix-credential-path";
      module = { services.boxmaker.credentials.honcho-key = "/etc/credstore.encrypted/honcho-key.cred"; }; }
    { name = "honcho-key reference"; anchor = "nix-credential-path";
      module = { services.boxmaker.settings.memoryd.honcho.key = "credential:honcho-key"; }; }
    { name = "plain honcho key"; anchor = "nix-secret-in-config";
      module = lib.recursiveUpdate withKey { services.boxmaker.settings.memoryd.honcho.key = lib.mkForce "eyJhbGciOiJIUzI1NiJ9.eyJ3IjoiYSJ9.sig"; }; }
    { name = "honcho key in memoryd's environment"; anchor = "nix-secret-in-environment";
      module = withKey // { systemd.services.boxmaker-memoryd.serviceConfig.Environment = [ "HONCHO_KEY=eyJ" ]; }; }
    { name = "honcho key in the store"; anchor = "nix-credential-path";
      module = lib.recursiveUpdate withKey { services.boxmaker.credentials.honcho-key = lib.mkForce "${builtins.storeDir}/0000000000000000000000000000000a-honcho-key.cred"; }; }
    { name = "honcho key of another role"; anchor = "nix-credential-path";
      module = lib.recursiveUpdate withKey { services.boxmaker.settings.gatewayd.honcho_key = "credential:honcho-key"; }; }
    { name = "token named by memoryd"; anchor = "nix-credential-path";
      module = { services.boxmaker.settings.memoryd.honcho.key = "credential:mattermost-token"; }; }
    { name = "relative honcho key"; anchor = "type";
      module = { services.boxmaker.credentials.honcho-key = "honcho-key.cred"; services.boxmaker.settings.memoryd.honcho.key = "credential:honcho-key"; }; }
    { name = "no credentials"; anchor = "nix-credential-path";
      module = { services.boxmaker.credentials = lib.mkForce { }; }; }
    { name = "llama by name"; anchor = "nix-network";
      module = { services.boxmaker.llamaServer = lib.mkForce "straylight:8080"; }; }
    { name = "llama without port"; anchor = "nix-network";
      module = { services.boxmaker.llamaServer = lib.mkForce "100.64.0.7"; }; }
    { name = "llama octet over 255"; anchor = "nix-network";
      module = { services.boxmaker.llamaServer = lib.mkForce "100.64.0.300:8080"; }; }
    { name = "mattermost by name"; anchor = "nix-network";
      module = { services.boxmaker.mattermostAddresses = lib.mkForce [ "chat.example.ts.net" ]; }; }
    { name = "honcho prefix too long"; anchor = "nix-network";
      module = { services.boxmaker.honchoAddresses = lib.mkForce [ "100.64.0.9/33" ]; }; }
    { name = "addresses as one string"; anchor = "type";
      module = { services.boxmaker.mattermostAddresses = lib.mkForce "100.64.0.8 100.100.100.100"; }; }
    { name = "gatewayd unconfigured"; anchor = "nix-config-missing";
      module = { services.boxmaker.settings.gatewayd = lib.mkForce { }; }; }
    { name = "root missing"; anchor = "nix-deployment-version";
      module = { services.boxmaker.roots = lib.mkForce (removeAttrs stubs.roots [ "loopd" ]); }; }
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
  honcho = result withKey;
  bare = result { services.boxmaker.settings.memoryd = lib.mkForce { }; services.boxmaker.honchoAddresses = lib.mkForce [ ]; };
  ids = result withIDs;
  # What the stubs and the positive case give, unsubstituted, so the test
  # builds the placeholders' values itself as bxctl install's Values does.
  inputs = {
    podman = "${stubs.fake "podman"}/bin/podman";
    images = stubs.imageIDs;
    idFiles = lib.mapAttrs (_: i: "${i.idFile}") stubs.images;
    roots = lib.mapAttrs (_: r: "${r}") stubs.roots;
    credentials = base.services.boxmaker.credentials // { honcho-key = honchoKey; };
    inherit (base.services.boxmaker) llamaServer mattermostAddresses honchoAddresses;
    model = (eval { }).config.services.boxmaker.model;
  };
  negatives = map (n: refused n) negatives;
}
