#!/usr/bin/env bash
# mmdebstrap's last hook for rootfs.sh: sets up the guest in the root
# filesystem $1 after its packages and guest/ are in place.
set -euo pipefail
root=${1:?usage: customize.sh ROOT}

# An unprivileged user for rootless Podman: uid 1000, linger (its manager,
# and so its Podman socket, runs from boot, as `loginctl enable-linger`
# would arrange), and 65536 subordinate uids and gids.
chroot "$root" useradd --create-home --uid 1000 --user-group --shell /bin/bash rootless
for f in subuid subgid; do
  grep -q '^rootless:' "$root/etc/$f" 2>/dev/null || echo 'rootless:100000:65536' >>"$root/etc/$f"
done
mkdir -p "$root/var/lib/systemd/linger"
: >"$root/var/lib/systemd/linger/rootless"

systemctl --root="$root" enable boxmaker-agent.service
systemctl --root="$root" --global enable podman.socket
# An empty machine-id would make this a first boot, and Debian's
# systemd-firstboot asks for a locale on the console.
systemctl --root="$root" mask systemd-firstboot.service
chroot "$root" systemd-machine-id-setup >/dev/null
rm -f "$root/var/lib/dbus/machine-id"
# No network device and nothing to wait for.
systemctl --root="$root" mask systemd-networkd-wait-online.service >/dev/null 2>&1 || true
# Root has no password: the agent is the only way in.
chroot "$root" passwd --lock root >/dev/null

printf '%s\n' virtio_pci virtio_blk ext4 >>"$root/etc/initramfs-tools/modules"
chroot "$root" update-initramfs -u -k all
rm -rf "$root/var/cache/apt/archives/"*.deb "$root/var/lib/apt/lists/"*_Packages
