package imagearchive

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
)

type file struct {
	name string
	mode int64
	typ  byte
	body string
	link string
}

func tarOf(t testing.TB, fs []file) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range fs {
		typ := f.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: f.name, Mode: f.mode, Typeflag: typ, Size: int64(len(f.body)), Linkname: f.link}
		if typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			tw.Write([]byte(f.body))
		}
	}
	tw.Close()
	return b.Bytes()
}

func hexsum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// archive wraps layer as images/role-image does; edit may change the
// config's text before it is hashed.
func archive(t testing.TB, layer []byte, edit func(string) string) []byte {
	diff := hexsum(layer)
	cfg := fmt.Sprintf(`{"architecture":"amd64","config":{"Entrypoint":["/bin/loopd"],"Env":["PATH=/bin"],"User":"61002:61002","WorkingDir":"/"},"created":"1970-01-01T00:00:01Z","os":"linux","rootfs":{"diff_ids":["sha256:%s"],"type":"layers"}}`, diff)
	if edit != nil {
		cfg = edit(cfg)
	}
	id := hexsum([]byte(cfg))
	man := fmt.Sprintf(`[{"Config":"%s.json","RepoTags":["localhost/boxmaker-loopd:x"],"Layers":["%s/layer.tar"]}]`, id, diff)
	return tarOf(t, []file{
		{name: "./", typ: tar.TypeDir, mode: 0o755},
		{name: "./" + diff + "/", typ: tar.TypeDir, mode: 0o755},
		{name: "./" + diff + "/layer.tar", mode: 0o644, body: string(layer)},
		{name: "./" + id + ".json", mode: 0o644, body: cfg},
		{name: "./manifest.json", mode: 0o644, body: man},
	})
}

var goodLayer = []file{
	{name: "./", typ: tar.TypeDir, mode: 0o755},
	{name: "./bin/", typ: tar.TypeDir, mode: 0o755},
	{name: "./bin/loopd", mode: 0o755, body: "\x7fELF"},
	{name: "./etc/", typ: tar.TypeDir, mode: 0o755},
	{name: "./etc/passwd", mode: 0o644, body: "root:x:0:0::/:/bin/false\n"},
	{name: "./tmp/", typ: tar.TypeDir, mode: 0o1777},
}

func TestReadAndExtract(t *testing.T) {
	b := archive(t, tarOf(t, goodLayer), nil)
	a, err := Read(b)
	if err != nil {
		t.Fatalf("Read = %v", err)
	}
	if !strings.HasPrefix(a.ID, "sha256:") || len(a.ID) != 71 || a.Config.Config.Entrypoint[0] != "/bin/loopd" {
		t.Errorf("Read = %+v", a)
	}
	dir := filepath.Join(t.TempDir(), "root")
	if err := a.Extract(dir); err != nil {
		t.Fatalf("Extract = %v", err)
	}
	fi, err := os.Stat(filepath.Join(dir, "bin/loopd"))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("bin/loopd: %v %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "tmp")); err != nil || fi.Mode()&os.ModeSticky == 0 {
		t.Errorf("tmp: %v %v, want sticky", fi, err)
	}
	if err := a.Extract(dir); err == nil {
		t.Error("Extract into an existing directory succeeded")
	}
}

func TestReadRefuses(t *testing.T) {
	layer := tarOf(t, goodLayer)
	cases := map[string][]byte{
		"config renamed": archive(t, layer, func(s string) string { return s }),
		"unknown config key": archive(t, layer, func(s string) string {
			return strings.Replace(s, `"os":"linux"`, `"os":"linux","extra":1`, 1)
		}),
		"layer not its diff_id": archive(t, layer, func(s string) string {
			return strings.Replace(s, hexsum(layer), strings.Repeat("0", 64), 1)
		}),
		"two layers": archive(t, layer, func(s string) string {
			return strings.Replace(s, `"diff_ids":["sha256:`+hexsum(layer)+`"]`, `"diff_ids":["sha256:`+hexsum(layer)+`","sha256:`+hexsum(layer)+`"]`, 1)
		}),
		"not a tar": []byte("hello"),
	}
	// A config whose bytes do not hash to its name.
	b := archive(t, layer, nil)
	cases["config edited after naming"] = bytes.Replace(b, []byte(`"WorkingDir":"/"`), []byte(`"WorkingDir":"x"`), 1)
	delete(cases, "config renamed")
	for name, b := range cases {
		if _, err := Read(b); err == nil {
			t.Errorf("%s: Read succeeded", name)
		} else if !strings.Contains(err.Error(), "docs/runbook.md#install-image") && name != "not a tar" {
			t.Errorf("%s: Read = %v, want the runbook pointer", name, err)
		}
	}
}

func TestEntriesRefuse(t *testing.T) {
	bad := map[string]file{
		"setuid":       {name: "./bin/su", mode: 0o4755, body: "x"},
		"setgid":       {name: "./bin/sg", mode: 0o2755, body: "x"},
		"parent":       {name: "../escape", mode: 0o644, body: "x"},
		"absolute":     {name: "/etc/shadow", mode: 0o644, body: "x"},
		"unclean":      {name: "./bin/../../x", mode: 0o644, body: "x"},
		"symlink":      {name: "./bin/sh", typ: tar.TypeSymlink, link: "/bin/busybox"},
		"hard link":    {name: "./bin/ln", typ: tar.TypeLink, link: "bin/loopd"},
		"device":       {name: "./dev/null", typ: tar.TypeChar, mode: 0o666},
		"no directory": {name: "./var/x", mode: 0o644, body: "x"},
		"duplicate":    {name: "./bin/loopd", mode: 0o755, body: "y"},
	}
	for name, f := range bad {
		a, err := Read(archive(t, tarOf(t, append(append([]file{}, goodLayer...), f)), nil))
		if err != nil {
			t.Fatalf("%s: Read = %v", name, err)
		}
		if _, err := a.Entries(); err == nil {
			t.Errorf("%s: Entries accepted %+v", name, f)
		}
		if err := a.Extract(filepath.Join(t.TempDir(), "root")); err == nil {
			t.Errorf("%s: Extract accepted %+v", name, f)
		}
	}
}

func FuzzRead(f *testing.F) {
	f.Add(archive(f, tarOf(f, goodLayer), nil))
	f.Add([]byte("not a tar"))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := Read(b)
		if err != nil {
			return
		}
		if sum := strings.TrimPrefix(a.ID, "sha256:"); len(sum) != 64 {
			t.Fatalf("Read accepted an ID %q", a.ID)
		}
		es, err := a.Entries()
		if err != nil {
			return
		}
		for _, e := range es {
			if strings.HasPrefix(e.Name, "/") || strings.Contains("/"+e.Name+"/", "/../") || e.Mode&^(0o777|os.ModeSticky) != 0 {
				t.Fatalf("Entries accepted %q mode %v", e.Name, e.Mode)
			}
		}
	})
}
