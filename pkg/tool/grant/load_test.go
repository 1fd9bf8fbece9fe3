package grant

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/ownership"
)

var update = flag.Bool("update", false, "rewrite testdata/canonical.golden")

const minimal = "[[grant]]\nid = %q\ntool = \"read_file\"\npaths = [\"/home/o\"]\nmax_taint = \"private\"\nmode = \"auto\"\n"

func grantText(id string) string { return strings.ReplaceAll(minimal, "%q", `"`+id+`"`) }

func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadDir(t *testing.T) {
	dir := writeDir(t, map[string]string{"b.toml": good, "a.toml": grantText("a1") + grantText("a2"), "README.md": "# docs\n"})
	set, err := LoadDir(dir, ownership.Self())
	if err != nil {
		t.Fatalf("LoadDir: %v", err)
	}
	if !set.Valid() || set.Len() != 6 || len(set.Files()) != 2 {
		t.Fatalf("set: valid %v, %d grants, files %v", set.Valid(), set.Len(), set.Files())
	}
	var ids []string
	for _, g := range set.Grants() {
		ids = append(ids, g.ID())
	}
	if got := strings.Join(ids, " "); got != "a1 a2 notes-read fetch.docs_1 shell-src shell-gh" {
		t.Errorf("grant order = %s, want file order", got)
	}
	if set.Files()[0] != filepath.Join(dir, "a.toml") {
		t.Errorf("files = %v", set.Files())
	}
	empty, err := LoadDir(t.TempDir(), ownership.Self())
	if err != nil || !empty.Valid() || empty.Len() != 0 {
		t.Errorf("empty dir = %v, %v; want a valid set of no grants", empty, err)
	}
}

// TestLoadDirFailsClosed: one problem anywhere makes the whole set
// invalid, and every problem is reported with its file.
func TestLoadDirFailsClosed(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		setup func(t *testing.T, dir string)
		want  []string // substrings, each in some problem line
	}{
		{name: "one bad file among good", files: map[string]string{"a.toml": grantText("a1"), "b.toml": grantText("b1") + "[[grant]]\nid = \"b2\"\n"},
			want: []string{"b.toml: grant b2: tool is missing"}},
		{name: "duplicate id across files", files: map[string]string{"a.toml": grantText("same"), "b.toml": grantText("same")},
			want: []string{"b.toml: grant same: id is also used in "}},
		{name: "every problem listed", files: map[string]string{"a.toml": "[[grant]]\nid = \"a\"\nbogus = 1\n", "b.toml": "x = ["},
			want: []string{`a.toml: grant a: unknown key "bogus"`, "b.toml: line 1"}},
		{name: "backup file", files: map[string]string{"a.toml": grantText("a"), "deny.toml.bak": grantText("d")},
			want: []string{"deny.toml.bak: not a grant file"}},
		{name: "mistyped extension", files: map[string]string{"deny.tml": grantText("d")},
			want: []string{"deny.tml: not a grant file"}},
		{name: "uppercase extension", files: map[string]string{"deny.TOML": grantText("d")},
			want: []string{"deny.TOML: not a grant file"}},
		{name: "subdirectory", setup: func(t *testing.T, dir string) {
			os.Mkdir(filepath.Join(dir, "old"), 0o755)
		}, want: []string{"old: not a grant file"}},
		{name: "directory named toml", setup: func(t *testing.T, dir string) {
			os.Mkdir(filepath.Join(dir, "x.toml"), 0o755)
		}, want: []string{"x.toml: not a regular file"}},
		{name: "broken link", setup: func(t *testing.T, dir string) {
			os.Symlink(filepath.Join(dir, "missing"), filepath.Join(dir, ".#deny.toml"))
		}, want: []string{".#deny.toml: cannot read"}},
		{name: "empty file", files: map[string]string{"deny.toml": ""}, want: []string{"deny.toml: holds no [[grant]] tables"}},
		{name: "too large", files: map[string]string{"big.toml": grantText("a") + "#" + strings.Repeat("x", 1<<20)}, want: []string{"larger than"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeDir(t, tt.files)
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			set, err := LoadDir(dir, ownership.Self())
			if set != nil || err == nil {
				t.Fatalf("LoadDir = %v, %v; want no set and an error", set, err)
			}
			var le *LoadError
			if !errors.As(err, &le) {
				t.Fatalf("error %T is not a *LoadError", err)
			}
			if !strings.Contains(err.Error(), "see docs/runbook.md#grants-invalid") {
				t.Errorf("error lacks its runbook pointer: %v", err)
			}
			for _, w := range tt.want {
				found := false
				for _, p := range le.Problems {
					if strings.Contains(p.String(), w) && strings.HasPrefix(p.String(), dir) {
						found = true
					}
				}
				if !found {
					t.Errorf("problems %q lack %q", le.Problems, w)
				}
			}
		})
	}
	if set, err := LoadDir(filepath.Join(t.TempDir(), "missing"), ownership.Self()); set != nil || err == nil || !strings.Contains(err.Error(), "cannot read the grant directory") {
		t.Errorf("LoadDir(missing) = %v, %v", set, err)
	}
}

func TestLoadDirFollowsLinks(t *testing.T) {
	store := writeDir(t, map[string]string{"x.toml": grantText("linked")})
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(store, "x.toml"), filepath.Join(dir, "x.toml")); err != nil {
		t.Fatal(err)
	}
	if set, err := LoadDir(dir, ownership.Self()); err != nil || set.Len() != 1 {
		t.Errorf("LoadDir through a link = %v, %v", set, err)
	}
}

func TestSetZeroAndNil(t *testing.T) {
	var nilSet *Set
	for _, s := range []*Set{nilSet, {}} {
		if s.Valid() || s.Len() != 0 || s.Grants() != nil || s.Files() != nil {
			t.Errorf("set %#v is valid or holds grants", s)
		}
	}
	if _, err := NewSet(Grant{}); err == nil {
		t.Error("NewSet accepted a zero Grant")
	}
	a, _ := New("x.toml", Spec{ID: "a", Tool: "read_file", Paths: []string{"/a"}, MaxTaint: "private", Mode: "auto"})
	if _, err := NewSet(a, a); err == nil || !strings.Contains(err.Error(), "unique") {
		t.Errorf("NewSet with a duplicate id = %v", err)
	}
	if s, err := NewSet(a); err != nil || !s.Valid() || s.Len() != 1 {
		t.Errorf("NewSet(a) = %v, %v", s, err)
	}
}

// TestCanonicalGolden pins the canonical form and hash of every grant in
// the example above: the audit log names grants by these hashes, so a
// change here changes every recorded hash and must be deliberate.
func TestCanonicalGolden(t *testing.T) {
	gs, ps := ParseFile("g.toml", []byte(good))
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	var b strings.Builder
	for _, g := range gs {
		sum := sha256.Sum256(g.Canonical())
		if hex.EncodeToString(sum[:]) != g.SHA256() {
			t.Errorf("%s: SHA256 is not the hash of Canonical", g.ID())
		}
		b.WriteString(g.SHA256() + " " + string(g.Canonical()) + "\n")
	}
	golden := filepath.Join("testdata", "canonical.golden")
	if *update {
		os.WriteFile(golden, []byte(b.String()), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("canonical forms changed:\n got %s\nwant %s", b.String(), want)
	}
}

// TestHashIgnoresLayout: the hash follows what a grant allows, not how
// the file is written or which file holds it.
func TestHashIgnoresLayout(t *testing.T) {
	a := "[[grant]]\nid = \"x\"\ntool = \"read_file\"\npaths = [\"/b\", \"/a/\"]\nmax_taint = \"private\"\nmode = \"auto\"\n"
	b := "# comment\n[[grant]]\nmode = \"auto\"  # trailing\nmax_taint = \"private\"\npaths = [\"/a\", \"/b\"]\nresult_class = \"private\"\nuntrusted = true\ntool = \"read_file\"\nid = \"x\"\n"
	c := strings.Replace(a, `"private"`, `"secret"`, 1)
	ga, _ := ParseFile("one.toml", []byte(a))
	gb, _ := ParseFile("two.toml", []byte(b))
	gc, _ := ParseFile("one.toml", []byte(c))
	if ga[0].SHA256() != gb[0].SHA256() {
		t.Errorf("same grant, different hashes:\n%s\n%s", ga[0].Canonical(), gb[0].Canonical())
	}
	if ga[0].SHA256() == gc[0].SHA256() {
		t.Error("different grants, same hash")
	}
	e1, _ := ParseFile("e.toml", []byte(grantText("e")+"expires = \"2027-01-01T02:00:00+02:00\"\n"))
	e2, _ := ParseFile("e.toml", []byte(grantText("e")+"expires = \"2027-01-01T00:00:00Z\"\n"))
	if e1[0].SHA256() != e2[0].SHA256() {
		t.Error("the same instant written in two zones hashes differently")
	}
}

// FuzzParseFile: whatever parses has a canonical form that is stable.
func FuzzParseFile(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte(grantText("a")))
	f.Add([]byte(consultGrant + "memory = \"identity_may_leave\"\n"))
	f.Add([]byte(consultGrant + "memory = \"all_may_leave\"\nuntrusted_sessions = true\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		gs, ps := ParseFile("f.toml", data)
		if (gs == nil) == (len(ps) == 0) {
			t.Fatalf("ParseFile returned %d grants and %d problems", len(gs), len(ps))
		}
		for _, g := range gs {
			again, err := New("f.toml", specOf(t, g))
			if err != nil || again.SHA256() != g.SHA256() {
				t.Fatalf("grant %s does not re-parse to itself: %v", g.ID(), err)
			}
		}
	})
}

// specOf writes a grant back as a Spec.
func specOf(t *testing.T, g Grant) Spec {
	s := Spec{ID: g.ID(), Tool: g.Tool(), MaxTaint: g.MaxTaint().String(), ResultClass: g.ResultClass().String(), Mode: g.Mode().String()}
	for _, p := range g.Paths() {
		s.Paths = append(s.Paths, p.String())
	}
	for _, h := range g.Hosts() {
		s.Hosts = append(s.Hosts, h.String())
	}
	u := g.Untrusted()
	s.Untrusted = &u
	if g.Tool() == "shell" {
		w := g.Writable()
		s.Writable = &w
		s.Secret = g.Secret()
	}
	if g.Tool() == "consult" {
		s.Secret, s.Model = g.Secret(), g.Model()
		u, m := g.UntrustedSessions(), g.Memory().String()
		s.UntrustedSessions, s.Memory = &u, &m
	}
	if e, ok := g.Expires(); ok {
		s.Expires = e.Format("2006-01-02T15:04:05.999999999Z07:00")
	}
	return s
}
