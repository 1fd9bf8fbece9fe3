package install

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"wntrmute.dev/boxmaker/pkg/host/imagearchive"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/ownership"
	"wntrmute.dev/boxmaker/pkg/host/units"
)

// ManifestName is the file the image build writes beside the archives:
// one line "ROLE sha256:<64 hex>" per image, the IDs images/role-image
// printed. An archive whose ID is not its line's is refused.
const ManifestName = "images.ids"

// maxManifest caps images.ids: six lines of 80 bytes.
const maxManifest = 4096

var idRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// imageRoles are the archives an install reads, in the manifest's order.
func imageRoles() []string { return append(append([]string{}, layout.Daemons...), units.Tool) }

// ParseManifest reads images.ids: exactly one line per role and the tool
// image, "ROLE ID", in any order, each ID sha256:<64 lowercase hex>;
// anything else (a blank line, a comment, an unknown or repeated role) is
// refused, so the file says one thing only.
func ParseManifest(b []byte) (map[string]string, error) {
	bad := func(format string, a ...any) error {
		return Refusal{fmt.Sprintf(ManifestName+" "+format+" (it holds one line \"ROLE sha256:ID\" per image, as the build in docs/units.md writes it)", a...), "see docs/runbook.md#install-image-pin"}
	}
	if len(b) > maxManifest {
		return nil, bad("is over %d bytes", maxManifest)
	}
	ids := map[string]string{}
	for i, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		f := strings.Split(l, " ")
		switch {
		case len(f) != 2:
			return nil, bad("line %d is not \"ROLE ID\"", i+1)
		case !slices.Contains(imageRoles(), f[0]):
			return nil, bad("line %d names %q, which is no image", i+1, f[0])
		case ids[f[0]] != "":
			return nil, bad("line %d names %s again", i+1, f[0])
		case !idRE.MatchString(f[1]):
			return nil, bad("line %d: %q is not sha256:<64 hex>", i+1, f[1])
		}
		ids[f[0]] = f[1]
	}
	for _, r := range imageRoles() {
		if ids[r] == "" {
			return nil, bad("has no line for %s", r)
		}
	}
	return ids, nil
}

// ManifestDigest is the pin of a manifest: "sha256:" and the sha256 of
// its bytes, what `sha256sum images.ids` prints on the build machine.
func ManifestDigest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// unsafeRefusal turns an ownership refusal of an install input into the
// install's own, with the rule's runbook entry.
func unsafeRefusal(what string, err error) error {
	var ue *ownership.UnsafeError
	if errors.As(err, &ue) {
		return Refusal{fmt.Sprintf("%s: %s: root installs from it, so only root and %s may have written it or any directory above it", what, ue.Explain(), "the installing owner"), "see docs/runbook.md#install-input-unsafe"}
	}
	return nil
}

// ReadImages reads DIR/<role>.tar for every role and DIR/tool.tar and
// checks each is the image its role needs and the one images.ids names.
// The directory, images.ids and each archive must pass package
// ownership's rule for owners (root and the installing owner), since
// whoever can write them chooses the binaries root installs; expect,
// when not "", is images.ids' own digest ([ManifestDigest]) as the owner
// took it where the images were built. It returns the tool archive's
// bytes too, the ones checked, for brokerd's Podman to load.
func ReadImages(dir string, owners ownership.Owners, expect string) (Images, []byte, error) {
	if _, err := owners.Check(dir); err != nil {
		if r := unsafeRefusal("--images "+dir, err); r != nil {
			return nil, nil, r
		}
		return nil, nil, Refusal{fmt.Sprintf("--images %s: %v", dir, err), "see docs/runbook.md#install-image"}
	}
	mp := filepath.Join(dir, ManifestName)
	mb, err := owners.ReadFile(mp, maxManifest)
	if err != nil {
		if r := unsafeRefusal(mp, err); r != nil {
			return nil, nil, r
		}
		return nil, nil, Refusal{fmt.Sprintf("%v: the build writes it beside the archives (docs/units.md)", err), "see docs/runbook.md#install-image-pin"}
	}
	if expect != "" && ManifestDigest(mb) != expect {
		return nil, nil, Refusal{fmt.Sprintf("%s has digest %s, not %s (--expect): these are not the images you built", mp, ManifestDigest(mb), expect), "see docs/runbook.md#install-image-pin"}
	}
	want, err := ParseManifest(mb)
	if err != nil {
		return nil, nil, err
	}
	im := Images{}
	var tool []byte
	for _, r := range imageRoles() {
		p := filepath.Join(dir, r+".tar")
		b, err := owners.ReadFile(p, imagearchive.MaxArchive)
		if err != nil {
			if ref := unsafeRefusal(p, err); ref != nil {
				return nil, nil, ref
			}
			return nil, nil, Refusal{fmt.Sprintf("image %s: %v (build it with images/role-image %s %s)", r, err, r, p), "see docs/runbook.md#install-image"}
		}
		a, err := imagearchive.Read(b)
		if err != nil {
			return nil, nil, Refusal{fmt.Sprintf("image %s: %v (build it with images/role-image %s %s)", r, err, r, p), "see docs/runbook.md#install-image"}
		}
		if a.ID != want[r] {
			return nil, nil, Refusal{fmt.Sprintf("image %s is %s, but %s names %s", r, a.ID, ManifestName, want[r]), "see docs/runbook.md#install-image-pin"}
		}
		ep := a.Config.Config.Entrypoint
		switch {
		case r == units.Tool && len(ep) != 0:
			// The runner names /bin/toolkit in each command; an
			// entrypoint would run it twice.
			return nil, nil, Refusal{fmt.Sprintf("the tool image has entrypoint %q; it must have none", ep), "see docs/runbook.md#install-image"}
		case r != units.Tool && (len(ep) != 1 || ep[0] != "/bin/"+r):
			return nil, nil, Refusal{fmt.Sprintf("image %s runs %q, not /bin/%s", r, ep, r), "see docs/runbook.md#install-image"}
		}
		if r == units.Tool {
			tool = b
		}
		im[r] = a
	}
	return im, tool, nil
}
