# checks.<system>.vm: the deployment scenario in a NixOS VM (runNixOSTest),
# as checks/vm's Debian guest runs it after bxctl install: every role up as
# its own user in its hardened unit with its root filesystem, loopd and
# brokerd without a network, the socket directories with the layout's
# modes, the configs where the daemons read them, the tool image in
# brokerd's Podman, the credential reaching only its role, and each unit's
# systemd-analyze exposure within deployment.json's exposureMax.
#
# Written but not run here: it needs a Nix builder with kvm and the
# nixos-test feature (docs/nix.md). Every figure it checks comes from
# modules/deployment.json.
{ pkgs, module }:

let
  deployment = builtins.fromJSON (builtins.readFile ../../modules/deployment.json);
  lib = pkgs.lib;
  py = builtins.toJSON;
  # The fake llama-server and Mattermost of the Debian VM test, on the
  # guest's own addresses (checks/fake).
  llama = "127.0.0.1:8080";
in
pkgs.testers.runNixOSTest {
  name = "boxmaker";
  nodes.machine = { config, ... }: {
    imports = [ module ];
    virtualisation.memorySize = 4096;
    virtualisation.diskSize = 8192;
    services.boxmaker = {
      enable = true;
      llamaServer = llama;
      mattermostAddresses = [ "127.0.0.1" ];
      honchoAddresses = [ "127.0.0.1" ];
      # Every credential, the optional one (Honcho's key) included: memoryd
      # names it, so its unit loads it (memoryd never waits on Honcho, which
      # is not running here).
      credentials = lib.listToAttrs (map (c: lib.nameValuePair c.name "/etc/credstore.encrypted/${c.name}.cred") deployment.credentials);
      settings.gatewayd = {
        url = "http://127.0.0.1:8065";
        token = "credential:mattermost-token";
      };
      settings.memoryd.honcho = {
        url = "http://127.0.0.1:8000";
        key = "credential:honcho-key";
        peer = "boxmaker-vm";
        trusted_workspace = "vm-trusted";
        untrusted_workspace = "vm-untrusted";
      };
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
        if u["linger"]:
            machine.wait_for_unit(f"user@{u['uid']}.service")
    for unit in d["units"]:
        machine.succeed(f"systemctl start {unit['name']}")
        machine.wait_for_unit(unit["name"])
        svc = unit["sections"]["Service"]
        user = svc["User"][0]
        machine.succeed(f"test \"$(systemctl show -p User --value {unit['name']})\" = {user}")
        if "RootDirectory" in svc:
            root = machine.succeed(f"systemctl show -p RootDirectory --value {unit['name']}").strip()
            assert root.startswith("/nix/store/"), f"{unit['name']}: RootDirectory {root}"
        if svc.get("PrivateNetwork") == ["yes"]:
            pid = machine.succeed(f"systemctl show -p MainPID --value {unit['name']}").strip()
            machine.fail(f"nsenter -t {pid} -n ip -o addr | grep -v ' lo '")
        exposure = float(machine.succeed(f"systemd-analyze security --no-pager {unit['name']} | tail -1 | awk '{{print $(NF-2)}}'"))
        assert exposure <= unit["exposureMax"], f"{unit['name']}: exposure {exposure} over {unit['exposureMax']}"
    for line in d["tmpfiles"]:
        kind, path, mode, owner, group = line.split()[:5]
        machine.succeed(f"test \"$(stat -c '%a %U %G' {path})\" = \"{int(mode, 8):o} {owner} {group}\"")
    for f in d["files"] + d["configs"]:
        path = f["path"].replace("@state@", d["stateDir"]).replace("@config@", d["stateDir"] + "/config")
        machine.succeed(f"test \"$(stat -c '%a %U %G' {path})\" = \"{int(f['mode'], 8):o} {f['owner']} {f['group']}\"")
    broker = next(u for u in d["users"] if u["linger"])
    # The tool image's ID, which boxmaker-config put into brokerd.toml from
    # the image's ID file, is the image brokerd's Podman holds.
    machine.succeed(f"runuser -u {broker['name']} -- env HOME={broker['home']} XDG_RUNTIME_DIR=/run/user/{broker['uid']} podman image exists $(grep -o 'sha256:[0-9a-f]*' /var/lib/boxmaker/config/brokerd.toml)")
    for c in d["credentials"]:
        unit = c["unit"]
        pid = machine.succeed(f"systemctl show -p MainPID --value {unit}").strip()
        machine.fail(f"grep -a test-{c['name']} /proc/{pid}/environ")
        machine.succeed(f"test -f /run/credentials/{unit}/{c['name']}")
  '';
}
