package broker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// TestGrantLinkedToAnotherUsersFileDeniesAll: an attack run linked a grant
// to a file another uid owned, and brokerd allowed an auto call on it
// (issue 13 item 1). Now the whole set is invalid: grants_invalid.
func TestGrantLinkedToAnotherUsersFileDeniesAll(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("giving a file to another uid needs root")
	}
	theirs := filepath.Join(t.TempDir(), "theirs.toml")
	evil := "[[grant]]\nid = \"evil\"\ntool = \"read_file\"\npaths = [\"/etc\"]\nmax_taint = \"secret\"\nmode = \"auto\"\n"
	if err := os.WriteFile(theirs, []byte(evil), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, 4242, -1); err != nil {
		t.Fatal(err)
	}
	h := startWith(t, grants, func(c *brokerd.Config) {
		os.MkdirAll(c.GrantsDir, 0o700)
		if err := os.Symlink(theirs, filepath.Join(c.GrantsDir, "evil.toml")); err != nil {
			t.Fatal(err)
		}
	})
	for _, args := range []string{`{"path":"/etc/shadow"}`, `{"path":"/home/owner/notes/a.md"}`} {
		r := result(t, h.call(t, "read_file", args))
		if r.Status != wire.StatusDenied || !strings.Contains(r.Output, "grants are invalid") {
			t.Errorf("read_file %s with a grant linked to uid 4242's file = %+v, want denied grants_invalid", args, r)
		}
	}
	h.stop()
	rep := audit.Verify(filepath.Join(h.cfg.StateDir, "broker", "audit"))
	if !rep.OK() || rep.Records != 2 {
		t.Fatalf("audit: %s", rep.Summary())
	}
}

// TestOwnerUID: with owner_uid set, grants are believed only when root
// or that uid owns them; another user's are refused, even a user brokerd
// itself runs as.
func TestOwnerUID(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("giving a file to another uid needs root")
	}
	owner := uint32(4243)
	h := startWith(t, grants, func(c *brokerd.Config) { c.OwnerUID = &owner })
	give := func(uid int) {
		for _, p := range []string{h.cfg.GrantsDir, filepath.Join(h.cfg.GrantsDir, "grants.toml")} {
			if err := os.Chown(p, uid, -1); err != nil {
				t.Fatal(err)
			}
		}
	}
	give(4242)
	r := result(t, h.call(t, "read_file", `{"path":"/home/owner/notes/a.md"}`))
	if r.Status != wire.StatusDenied || !strings.Contains(r.Output, "grants are invalid") {
		t.Errorf("read_file with grants owned by uid 4242 and owner_uid 4243 = %+v, want grants_invalid", r)
	}
	give(4243)
	r = result(t, h.call(t, "read_file", `{"path":"/home/owner/notes/a.md"}`))
	if strings.Contains(r.Output, "grants are invalid") {
		t.Errorf("read_file with the owner's grants = %+v, want them used", r)
	}
}
