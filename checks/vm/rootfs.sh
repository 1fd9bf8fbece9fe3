#!/usr/bin/env bash
# Builds the VM test host's Debian 12 root filesystem into the directory
# $1 (which must not exist yet): mmdebstrap from this machine's Debian
# mirror (sources.sh), the packages in packages.txt, then guest/ copied
# over it and the guest set up: an unprivileged user `rootless` (uid 1000)
# with linger and subordinate ids, the agent unit enabled, every user's
# Podman socket enabled, a small initramfs. Run as root. The harness
# (build.go) caches the result keyed by the hash of this script,
# sources.sh, packages.txt and guest/, and runs it only on a cold cache.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: rootfs.sh OUTDIR}
if [ -e "$out" ]; then
  echo "rootfs: $out exists; the harness builds into a new directory" >&2
  exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "rootfs: needs root (mmdebstrap --mode=root, chroot)" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$here/sources.sh" >"$work/debian.sources"
pkgs=$(grep -v '^[[:space:]]*\(#\|$\)' "$here/packages.txt" | tr '\n' ',' | sed 's/,$//')

# The guest's own files, owned by root whoever checked them out.
tar -C "$here/guest" --owner=0 --group=0 -cf "$work/guest.tar" .

mmdebstrap --mode=root --variant=apt --include="$pkgs" \
  --aptopt='APT::Install-Recommends "false"' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --setup-hook='mkdir -p "$1/etc/initramfs-tools/conf.d" && cp '"$here"'/guest/etc/initramfs-tools/conf.d/boxmaker.conf "$1/etc/initramfs-tools/conf.d/"' \
  --customize-hook='tar -C "$1" -xf '"$work"'/guest.tar' \
  --customize-hook="$here/customize.sh" \
  bookworm "$out.tmp" "$work/debian.sources"
mv "$out.tmp" "$out"
