package install

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/ownership"
	"wntrmute.dev/boxmaker/pkg/host/units"
)

func hexsum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// archiveOf is role's image as images/role-image wraps it: one layer
// holding /bin/<role> (the tool image: /bin/toolkit and no entrypoint).
func archiveOf(t testing.TB, role string) ([]byte, string) {
	bin, entry := role, fmt.Sprintf(`"Entrypoint":["/bin/%s"],`, role)
	if role == units.Tool {
		bin, entry = "toolkit", `"Entrypoint":[],`
	}
	tarOf := func(files map[string]string) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, name := range []string{"./", "./bin/", "./bin/" + bin, "./manifest.json"} {
			body, ok := files[name]
			if !ok {
				continue
			}
			h := &tar.Header{Name: name, Mode: 0o755, Typeflag: tar.TypeDir}
			if !strings.HasSuffix(name, "/") {
				h = &tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(body))}
			}
			if err := tw.WriteHeader(h); err != nil {
				t.Fatal(err)
			}
			tw.Write([]byte(body))
		}
		tw.Close()
		return b.Bytes()
	}
	layer := tarOf(map[string]string{"./": "", "./bin/": "", "./bin/" + bin: "\x7fELF " + role})
	diff := hexsum(layer)
	cfg := fmt.Sprintf(`{"architecture":"amd64","config":{%s"Env":["PATH=/bin"],"User":"61002:61002","WorkingDir":"/"},"created":"1970-01-01T00:00:01Z","os":"linux","rootfs":{"diff_ids":["sha256:%s"],"type":"layers"}}`, entry, diff)
	id := hexsum([]byte(cfg))
	man := fmt.Sprintf(`[{"Config":"%s.json","RepoTags":["localhost/boxmaker-%s:x"],"Layers":["%s/layer.tar"]}]`, id, role, diff)
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range []struct {
		name, body string
	}{{"./", ""}, {"./" + diff + "/", ""}, {"./" + diff + "/layer.tar", string(layer)}, {"./" + id + ".json", cfg}, {"./manifest.json", man}} {
		h := &tar.Header{Name: f.name, Mode: 0o755, Typeflag: tar.TypeDir}
		if !strings.HasSuffix(f.name, "/") {
			h = &tar.Header{Name: f.name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(f.body))}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(f.body))
	}
	tw.Close()
	return b.Bytes(), "sha256:" + id
}

// imageDir writes every image and images.ids into a new directory, as
// docs/units.md's build does, and returns it and the manifest's digest.
func imageDir(t testing.TB) (string, string) {
	dir := filepath.Join(t.TempDir(), "images")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var ids strings.Builder
	for _, r := range imageRoles() {
		b, id := archiveOf(t, r)
		if err := os.WriteFile(filepath.Join(dir, r+".tar"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&ids, "%s %s\n", r, id)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestName), []byte(ids.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, ManifestDigest([]byte(ids.String()))
}

func TestReadImages(t *testing.T) {
	dir, digest := imageDir(t)
	im, tool, err := ReadImages(dir, ownership.Self(), digest)
	if err != nil {
		t.Fatalf("ReadImages = %v", err)
	}
	if len(im) != len(imageRoles()) || len(tool) == 0 {
		t.Errorf("ReadImages = %d images, tool %d bytes", len(im), len(tool))
	}
	if _, _, err := ReadImages(dir, ownership.Self(), ""); err != nil {
		t.Errorf("ReadImages without --expect = %v", err)
	}
	other, _ := archiveOf(t, "gatewayd")
	for _, c := range []struct {
		name, anchor string
		plant        func(t *testing.T, dir string) string // returns the dir to read
	}{
		{"images dir group-writable", "install-input-unsafe", func(t *testing.T, dir string) string {
			os.Chmod(dir, 0o770)
			return dir
		}},
		{"a tar world-writable", "install-input-unsafe", func(t *testing.T, dir string) string {
			os.Chmod(filepath.Join(dir, "gatewayd.tar"), 0o666)
			return dir
		}},
		{"the manifest group-writable", "install-input-unsafe", func(t *testing.T, dir string) string {
			os.Chmod(filepath.Join(dir, ManifestName), 0o664)
			return dir
		}},
		{"a directory above writable by everyone", "install-input-unsafe", func(t *testing.T, dir string) string {
			os.Chmod(filepath.Dir(dir), 0o777)
			return dir
		}},
		{"owned by someone not trusted", "install-input-unsafe", func(t *testing.T, dir string) string {
			return dir // read below with owners that leave out this uid
		}},
		{"no manifest", "install-image-pin", func(t *testing.T, dir string) string {
			os.Remove(filepath.Join(dir, ManifestName))
			return dir
		}},
		{"a tar replaced", "install-image-pin", func(t *testing.T, dir string) string {
			os.WriteFile(filepath.Join(dir, "loopd.tar"), other, 0o644) // valid, but gatewayd's
			return dir
		}},
		{"the manifest names another set", "install-image-pin", func(t *testing.T, dir string) string {
			b, _ := os.ReadFile(filepath.Join(dir, ManifestName))
			os.WriteFile(filepath.Join(dir, ManifestName), append(b, '\n'), 0o644)
			return dir
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, digest := imageDir(t)
			owners := ownership.Self()
			if c.name == "owned by someone not trusted" {
				if os.Getuid() == 0 {
					t.Skip("root owns every test file")
				}
				owners = ownership.Trust()
			}
			_, _, err := ReadImages(c.plant(t, dir), owners, digest)
			if err == nil || !strings.HasSuffix(err.Error(), "see docs/runbook.md#"+c.anchor) {
				t.Errorf("ReadImages = %v, want %s", err, c.anchor)
			}
		})
	}
	// --expect pins the set the owner built: the same images under
	// another build's manifest digest are refused.
	dir2, _ := imageDir(t)
	if _, _, err := ReadImages(dir2, ownership.Self(), "sha256:"+strings.Repeat("0", 64)); err == nil || !strings.Contains(err.Error(), "install-image-pin") {
		t.Errorf("ReadImages with another --expect = %v", err)
	}
}

func TestParseManifest(t *testing.T) {
	var good strings.Builder
	for i, r := range imageRoles() {
		fmt.Fprintf(&good, "%s sha256:%s\n", r, strings.Repeat(string(rune('a'+i)), 64))
	}
	ids, err := ParseManifest([]byte(good.String()))
	if err != nil || ids["tool"] != "sha256:"+strings.Repeat("f", 64) {
		t.Fatalf("ParseManifest = %v, %v", ids, err)
	}
	for name, text := range map[string]string{
		"a role missing":   strings.SplitN(good.String(), "\n", 2)[1],
		"a role twice":     good.String() + "loopd sha256:" + strings.Repeat("1", 64) + "\n",
		"an unknown role":  good.String() + "toolbox sha256:" + strings.Repeat("1", 64) + "\n",
		"an ID not sha256": strings.Replace(good.String(), "sha256:aaaa", "sha512:aaaa", 1),
		"upper-case hex":   strings.Replace(good.String(), "sha256:aaaa", "sha256:AAAA", 1),
		"a comment":        "# built today\n" + good.String(),
		"two spaces":       strings.Replace(good.String(), " ", "  ", 1),
		"too large":        good.String() + strings.Repeat("#", maxManifest),
	} {
		if _, err := ParseManifest([]byte(text)); err == nil || !strings.Contains(err.Error(), "install-image-pin") {
			t.Errorf("%s: ParseManifest = %v, want install-image-pin", name, err)
		}
	}
}

// FuzzParseManifest: whatever images.ids holds, ParseManifest returns
// either a refusal or one well-formed ID for every image and no other.
func FuzzParseManifest(f *testing.F) {
	var good strings.Builder
	for _, r := range imageRoles() {
		fmt.Fprintf(&good, "%s sha256:%s\n", r, strings.Repeat("0", 64))
	}
	f.Add([]byte(good.String()))
	f.Add([]byte("loopd sha256:x\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ids, err := ParseManifest(b)
		if err != nil {
			return
		}
		if len(ids) != len(imageRoles()) {
			t.Fatalf("ParseManifest(%q) = %d ids", b, len(ids))
		}
		for _, r := range imageRoles() {
			if !idRE.MatchString(ids[r]) {
				t.Fatalf("ParseManifest(%q)[%s] = %q", b, r, ids[r])
			}
		}
	})
}
