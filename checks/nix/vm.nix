# checks.<system>.vm: the deployment scenario in a NixOS VM (runNixOSTest),
# the same as checks/vm's Debian guest runs: every role up as its own user
# in a rootless container, the socket directories with the layout's modes,
# the credentials reaching only their role, and each unit's systemd-analyze
# exposure within deployment.json's exposureMax.
#
# Written but not run here: it needs a Nix builder with kvm and the
# nixos-test feature (docs/nix.md). Every figure it checks comes from
# modules/deployment.json.
{ pkgs, module }:

let
  deployment = builtins.fromJSON (builtins.readFile ../../modules/deployment.json);
  lib = pkgs.lib;
  py = builtins.toJSON;
in
pkgs.testers.runNixOSTest {
  name = "boxmaker";
  nodes.machine = { ... }: {
    imports = [ module ];
    virtualisation.memorySize = 4096;
    virtualisation.diskSize = 8192;
    services.boxmaker = {
      enable = true;
      credentials = lib.listToAttrs (map (c: lib.nameValuePair c.name "/etc/credstore.encrypted/${c.name}.cred") deployment.credentials);
      settings.gatewayd.token = "credential:mattermost-token";
      settings.memoryd.honcho.key = "credential:honcho-key";
    };
    # The credentials are made in the test script (systemd-creds with the
    # host key), so the units must not start before they exist.
    systemd.services = lib.listToAttrs (map (u: lib.nameValuePair (lib.removeSuffix ".service" u.name) { wantedBy = lib.mkForce [ ]; }) deployment.units);
  };

  testScript = ''
    import json
    d = json.loads(${py (builtins.toJSON deployment)})
    machine.wait_for_unit("multi-user.target")
    machine.succeed("mkdir -p /etc/credstore.encrypted")
    for c in d["credentials"]:
        machine.succeed(f"printf test-{c['name']} | systemd-creds encrypt --name={c['name']} - /etc/credstore.encrypted/{c['name']}.cred")
    for u in d["users"]:
        machine.wait_for_unit(f"user@{u['uid']}.service")
    for unit in d["units"]:
        machine.succeed(f"systemctl start {unit['name']}")
        machine.wait_for_unit(unit["name"])
        user = unit["sections"]["Service"]["User"][0]
        machine.succeed(f"test \"$(systemctl show -p User --value {unit['name']})\" = {user}")
        exposure = float(machine.succeed(f"systemd-analyze security --no-pager {unit['name']} | tail -1 | awk '{{print $(NF-2)}}'"))
        assert exposure <= unit["exposureMax"], f"{unit['name']}: exposure {exposure} over {unit['exposureMax']}"
    for line in d["tmpfiles"]:
        kind, path, mode, owner, group = line.split()[:5]
        machine.succeed(f"test \"$(stat -c '%a %U %G' {path})\" = \"{int(mode, 8):o} {owner} {group}\"")
    for c in d["credentials"]:
        unit = f"boxmaker-{c['role']}.service"
        pid = machine.succeed(f"systemctl show -p MainPID --value {unit}").strip()
        machine.fail(f"grep -a test-{c['name']} /proc/{pid}/environ")
  '';
}
