# The gate derivation's own commands (nix/default.nix `gate`), one phase
# each: `vet` (its buildPhase) and `test` (its checkPhase). checks/nix/sandbox
# runs this same file in an approximation of the Nix sandbox, so what it
# proves is what the derivation runs. Run as `bash nix/gate-check.sh PHASE
# [PACKAGES...]` from the source's top (the default packages are ./...,
# which never matches vendor/). Needs only go and stdenv's tools.
set -euo pipefail

phase=${1:?usage: gate-check.sh vet|test [PACKAGES...]}
shift
[ $# -gt 0 ] || set -- ./...
# cmd/brokerd/tags.txt: the bindings' build tags, one or more a line.
read -r -d '' -a words <cmd/brokerd/tags.txt || true
tags=$(
	IFS=,
	echo "${words[*]}"
)

case $phase in
vet)
	go vet -tags "$tags" "$@"
	;;
test)
	# As nixpkgs' own buildGoModule checkPhase does
	# (pkgs/build-support/go/module.nix: "We do not set trimpath for
	# tests, in case they reference test assets"): our tests find the
	# repository by their source file's path (runtime.Caller), which
	# -trimpath would make module-relative.
	export GOFLAGS=${GOFLAGS//-trimpath/}
	export HOME=${TMPDIR:-/tmp}
	# -short: the tests that need the host (Podman, a VM, a network, a
	# second run of this gate) skip; without CI set, the checks whose
	# tools are absent say so in one line.
	go test -short -count=1 -tags "$tags" "$@"
	;;
*)
	echo "gate-check.sh: unknown phase $phase (vet or test)" >&2
	exit 2
	;;
esac
