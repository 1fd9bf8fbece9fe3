package backup

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
)

// TestRestoreAnchorsAreRestores: the anchors checked are the owner's
// anchors of the logs under Options.From, whatever the manifest says;
// a backup left without its anchored audit log, and a restore that would
// check no anchor, are refused unless the owner says NoAnchors; the
// manifest's taken time must be RFC 3339.
func TestRestoreAnchorsAreRestores(t *testing.T) {
	for _, c := range []struct {
		name      string
		anchored  bool                    // the owner anchored the source's audit log
		past      bool                    // ... at a seq past the backup's end
		noAnchors bool                    // Options.NoAnchors
		edit      func(*Manifest, string) // the backup edited (manifest, backup dir)
		want      string                  // "" to restore
	}{
		{name: "anchored", anchored: true},
		{name: "an anchor past the end", anchored: true, past: true, want: "audit log does not verify"},
		{name: "the manifest names another log", anchored: true, past: true, edit: func(m *Manifest, _ string) {
			m.AuditLog, m.ConsultLog = "/nowhere/broker/audit", "/nowhere/broker/consult"
		}, want: "audit log does not verify"},
		{name: "the audit log left out", anchored: true, edit: dropAudit, want: "#restore-anchors"},
		{name: "the audit log left out, no-anchors", anchored: true, noAnchors: true, edit: dropAudit, want: "#restore-anchors"},
		{name: "no anchor of the source", want: "#restore-anchors"},
		{name: "no anchor, no-anchors", noAnchors: true},
		{name: "taken not RFC 3339", anchored: true, edit: func(m *Manifest, _ string) { m.Taken = "yesterday\x1b[2J" }, want: "#restore-corrupt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			state, _ := newState(t)
			dest := filepath.Join(t.TempDir(), "b")
			m, err := Take(state, dest, time.Now())
			must(t, err)
			key := resolved(layout.Audit.In(state))
			var mine []audit.Anchor
			if c.anchored {
				e := audit.VerifyEnd(layout.Audit.In(state), nil)
				a := audit.NewAnchor(key, e.Report, time.Now())
				if c.past {
					a.Seq, a.Hash = m.AuditSeq+5, strings.Repeat("ab", 32)
				}
				mine = append(mine, a)
			}
			anchors := func(log string) ([]audit.Anchor, error) {
				if log == key {
					return mine, nil
				}
				return nil, nil
			}
			if c.edit != nil {
				c.edit(m, dest)
				must(t, writeManifest(dest, m))
			}
			target := filepath.Join(t.TempDir(), "restored")
			r, err := Restore(dest, target, Options{Anchors: anchors, From: state, NoAnchors: c.noAnchors})
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.anchored && r.Anchors != 1 {
					t.Errorf("%d anchors checked, want 1", r.Anchors)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("restore = %v; want it refused with %s", err, c.want)
			}
			if ents, _ := os.ReadDir(filepath.Dir(target)); len(ents) != 0 {
				t.Errorf("a refused restore left %v", ents)
			}
		})
	}
}

// dropAudit takes the audit log out of a backup and its manifest, as
// one editing the backup would.
func dropAudit(m *Manifest, dest string) {
	os.RemoveAll(filepath.Join(dest, FilesDir, layout.Audit.Path))
	m.Files = slices.DeleteFunc(m.Files, func(f File) bool { return strings.HasPrefix(f.Path, layout.Audit.Path+"/") })
	m.Dirs = slices.DeleteFunc(m.Dirs, func(d Dir) bool { return d.Path == layout.Audit.Path })
}

// TestRestoreModesAreTheTables: a manifest that asks for open modes gets
// the layout table's (one user: group and other bits dropped).
func TestRestoreModesAreTheTables(t *testing.T) {
	state, _ := newState(t)
	dest := filepath.Join(t.TempDir(), "b")
	m, err := Take(state, dest, time.Now())
	must(t, err)
	for i := range m.Dirs {
		m.Dirs[i].Mode = 0o2777
	}
	for i := range m.Files {
		m.Files[i].Mode = 0o777
	}
	must(t, writeManifest(dest, m))
	target := filepath.Join(t.TempDir(), "restored")
	if _, err := Restore(dest, target, unanchored(state)); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{
		"memory":               os.ModeDir | 0o700,
		"memory/user.md":       0o600,
		"sessions":             os.ModeDir | 0o700,
		"sessions/s-1":         os.ModeDir | 0o700,
		"sessions/s-1/0.jsonl": 0o600,
		"grants/read.toml":     0o600,
		"config/loopd.toml":    0o600,
		"format":               0o600,
	} {
		fi, err := os.Lstat(filepath.Join(target, p))
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if got := fi.Mode() & (os.ModeDir | os.ModeSetgid | 0o7777); got != want {
			t.Errorf("%s restored with mode %v, want %v", p, got, want)
		}
	}
}
