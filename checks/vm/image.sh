#!/usr/bin/env bash
# Makes the VM test host's boot files in the directory $4 (which must not
# exist yet) from the root filesystem $1 (rootfs.sh), the Podman binary $2
# and the agent binary $3: copies both binaries into the root filesystem
# (overwriting what an earlier image put there), then writes disk.img, an
# ext4 image made without mounting anything (mke2fs -d), and the kernel
# and initramfs beside it. The harness (build.go) caches the result keyed
# by the root filesystem's key, both binaries' hashes and this script's.
set -euo pipefail
root=${1:?usage: image.sh ROOTFS PODMAN AGENT OUTDIR}
podman=${2:?}
agent=${3:?}
out=${4:?}
if [ -e "$out" ]; then
  echo "image: $out exists; the harness builds into a new directory" >&2
  exit 1
fi
install -D -m 0755 "$podman" "$root/usr/local/bin/podman"
install -D -m 0755 "$agent" "$root/usr/local/sbin/boxmaker-agent"

kernels=("$root"/boot/vmlinuz-*)
initrds=("$root"/boot/initrd.img-*)
if [ ${#kernels[@]} -ne 1 ] || [ ${#initrds[@]} -ne 1 ] || [ ! -f "${kernels[0]}" ] || [ ! -f "${initrds[0]}" ]; then
  echo "image: want exactly one kernel and one initramfs in $root/boot, have: ${kernels[*]} ${initrds[*]}" >&2
  exit 1
fi

mkdir -p "$out.tmp"
# Room for the tests' container storage and logs on top of the files;
# the image is sparse, and qemu's snapshot=on keeps every write off it.
size=$(( $(du -sm "$root" | cut -f1) + 2048 ))
mke2fs -q -F -t ext4 -L boxvm -E root_owner=0:0 -d "$root" "$out.tmp/disk.img" "${size}M"
cp "${kernels[0]}" "$out.tmp/vmlinuz"
cp "${initrds[0]}" "$out.tmp/initrd.img"
mv "$out.tmp" "$out"
