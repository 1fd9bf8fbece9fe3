# The Go binaries, one buildGoModule each, and the Go gate as a derivation.
#
# Invariant: every binary is built from this repository with CGO_ENABLED=0,
# -trimpath (buildGoModule's default) and the one vendorHash recorded in
# ./vendor-hash.json, which checks/nix's TestVendorHash keeps equal to the
# NAR hash of `go mod vendor` for the current go.sum (docs/nix.md says how
# to redo it). brokerd alone gets the tags of cmd/brokerd/tags.txt; no
# binary ever gets boxmaker_testnet. The Go toolchain is at least go.mod's.
{ pkgs, lib ? pkgs.lib }:

let
  record = builtins.fromJSON (builtins.readFile ./vendor-hash.json);

  # go.mod's `go` line: the toolchain must be at least this.
  goModGo = let
    m = builtins.match ".*\ngo ([0-9.]+)\n.*" (builtins.readFile ../go.mod);
  in if m == null then throw "nix: go.mod has no go line" else builtins.head m;
  go = if lib.versionAtLeast pkgs.go.version goModGo then pkgs.go else pkgs.go_1_26;
  buildGoModule = assert lib.assertMsg (lib.versionAtLeast go.version goModGo)
    "nix: nixpkgs' Go ${go.version} is older than go.mod's ${goModGo}; see docs/runbook.md#nix-go-too-old";
    pkgs.buildGoModule.override { inherit go; };

  words = s: lib.filter (w: w != "") (lib.splitString " " (builtins.replaceStrings [ "\n" "\t" ] [ " " " " ] s));
  brokerdTags = words (builtins.readFile ../cmd/brokerd/tags.txt);

  # The whole repository but what git ignores: `go mod vendor` must see the
  # same packages (tests included) as when the hash was recorded.
  src = lib.cleanSource ../.;
  version = "0.1.0";

  binary = name: extra: buildGoModule ({
    pname = name;
    inherit version src;
    inherit (record) vendorHash;
    subPackages = [ "cmd/${name}" ];
    env.CGO_ENABLED = 0;
    ldflags = [ "-s" "-w" ];
    # The gate (below) runs the tests; a package build only builds.
    doCheck = false;
    meta.mainProgram = name;
  } // extra);

  names = [ "gatewayd" "loopd" "inferproxy" "memoryd" "toolkit" "bxctl" ];
in
rec {
  # The toolchain every build uses (also the dev shell's).
  inherit go;

  binaries = lib.genAttrs names (n: binary n { })
    // { brokerd = binary "brokerd" { tags = brokerdTags; }; };

  # services.boxmaker.package: every binary in one bin/, what the roots
  # and images are built from (images/default.nix) and what the overlay
  # calls pkgs.boxmaker.
  package = pkgs.symlinkJoin {
    name = "boxmaker-${version}";
    paths = builtins.attrValues binaries;
    meta = {
      description = "Boxmaker: a sovereign personal agent harness (its Go roles, toolkit and bxctl)";
      mainProgram = "bxctl";
      platforms = lib.platforms.linux;
    };
  };

  # The Go gate as a derivation: vet, and every test under -short (those
  # needing the host skip), offline, from the vendored modules. Its two
  # phases are ./gate-check.sh, which checks/nix/sandbox runs in an
  # approximation of this sandbox; it needs only go and stdenv's tools.
  gate = buildGoModule {
    pname = "boxmaker-gate";
    inherit version src;
    inherit (record) vendorHash;
    env.CGO_ENABLED = 0;
    buildPhase = ''
      runHook preBuild
      bash nix/gate-check.sh vet
      runHook postBuild
    '';
    doCheck = true;
    checkPhase = ''
      runHook preCheck
      bash nix/gate-check.sh test
      runHook postCheck
    '';
    installPhase = "touch $out";
  };
}
