# boxmaker-install-config MODE OWNER GROUP SRC DEST [ROLE=IDFILE...]
#
# boxmaker-config's step (modules/boxmaker.nix): installs SRC as DEST with
# MODE, OWNER and GROUP, each @image:ROLE@ in it replaced by the image ID
# held in IDFILE (a file of the built image's output, read now: evaluating
# the system never builds an image). An ID file that does not hold
# sha256:<64 hex>, or a placeholder left without one, stops the unit and
# writes nothing. The module prepends PATH; run as `bash` by checks/nix.
set -euo pipefail

checkID() {
	if ! printf '%s\n' "$2" | grep -Eqx 'sha256:[0-9a-f]{64}'; then
		echo "boxmaker-install-config: $1 holds \"$2\", not an image ID (sha256:<64 hex>); see docs/runbook.md#nix-image-id" >&2
		exit 1
	fi
}

if [ $# -lt 5 ]; then
	echo "usage: boxmaker-install-config MODE OWNER GROUP SRC DEST [ROLE=IDFILE...]" >&2
	exit 2
fi
mode=$1 owner=$2 group=$3 src=$4 dest=$5
shift 5
sedArgs=(-e "")
for pair in "$@"; do
	role=${pair%%=*} file=${pair#*=}
	id=$(cat "$file")
	checkID "$file" "$id"
	sedArgs+=(-e "s|@image:$role@|$id|g")
done
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
sed "${sedArgs[@]}" "$src" >"$tmp"
if grep -q '@image:' "$tmp"; then
	echo "boxmaker-install-config: $dest would keep an image placeholder (no ID file was given for it); see docs/runbook.md#nix-image-id" >&2
	exit 1
fi
install -m "$mode" -o "$owner" -g "$group" "$tmp" "$dest"
