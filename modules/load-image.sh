# boxmaker-load-image STREAM --id ID | --id-file FILE
#
# The tool image's loader (modules/boxmaker.nix): runs the image's stream
# script into $PODMAN load (brokerd's rootless Podman; nothing is pulled)
# and checks that Podman then has the image ID, given or read from FILE (a
# file of the built image's output, read now, never at evaluation). An ID
# that is not sha256:<64 hex> stops the unit before anything is loaded.
# The module prepends PATH and PODMAN; run as `bash` by checks/nix.
set -euo pipefail

if [ $# -ne 3 ]; then
	echo "usage: boxmaker-load-image STREAM --id ID | --id-file FILE" >&2
	exit 2
fi
stream=$1 how=$2 arg=$3
case $how in
--id) id=$arg ;;
--id-file) id=$(cat "$arg") ;;
*)
	echo "usage: boxmaker-load-image STREAM --id ID | --id-file FILE" >&2
	exit 2
	;;
esac
if ! printf '%s\n' "$id" | grep -Eqx 'sha256:[0-9a-f]{64}'; then
	echo "boxmaker-load-image: $arg holds \"$id\", not an image ID (sha256:<64 hex>); see docs/runbook.md#nix-image-id" >&2
	exit 1
fi
"$stream" | "$PODMAN" load
if ! "$PODMAN" image exists "$id"; then
	echo "boxmaker-load-image: $stream was loaded but Podman has no image $id; see docs/runbook.md#nix-image-id" >&2
	exit 1
fi
