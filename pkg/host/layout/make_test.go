package layout

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// needRoot skips a test that must give files to other uids, in one
// line, and fails it under CI, where the tests run as root.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("this test needs root, and CI is set")
		}
		t.Skip("needs root: it gives files to the role users")
	}
}

// perRole is a state directory as bxctl up as root makes it, a user per
// role (root the owner), and those users.
func perRole(t *testing.T) (string, Users) {
	t.Helper()
	u := DefaultUsers(ID{})
	state := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Make(state, u); err != nil {
		t.Fatalf("Make on an empty state directory = %v", err)
	}
	return state, u
}

// outside is a directory beside the state directory holding root's
// files, each 0644, with the names a role would point Make at. It
// returns the directory; [untouched] checks nothing in it changed.
func outside(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"victim", "notes.md", "journal.jsonl", "token", "audit.head", "x.jsonl"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("root's\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// untouched fails t if any file in dir, or dir itself, is no longer
// root's, mode 0644 (0755 for dir) and, for a file, "root's\n".
func untouched(t *testing.T, dir string) {
	t.Helper()
	check := func(p string, want os.FileMode) {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Errorf("outside file %s: %v", p, err)
			return
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != 0 || st.Gid != 0 || fi.Mode() != want {
			t.Errorf("outside %s is now uid %d gid %d mode %v; Make changed a file outside the state directory", p, st.Uid, st.Gid, fi.Mode())
		}
	}
	check(dir, os.ModeDir|0o755)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ents {
		check(filepath.Join(dir, d.Name()), 0o644)
		if b, _ := os.ReadFile(filepath.Join(dir, d.Name())); string(b) != "root's\n" {
			t.Errorf("outside %s now holds %q", d.Name(), b)
		}
	}
}

// give makes p (a file, a directory or a FIFO already there) role's.
func give(t *testing.T, u Users, role, p string) {
	t.Helper()
	id := u.Of(role)
	if err := os.Lchown(p, int(id.UID), int(id.GID)); err != nil {
		t.Fatal(err)
	}
}

// swapLink moves p aside (to p.real) and puts a symbolic link to target
// in its place, as a role racing Make would.
func swapLink(t *testing.T, p, target string) {
	t.Helper()
	if err := os.Rename(p, p+".real"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// TestMakeRefusesPlanted: what a role can plant in its own directories
// before bxctl up runs (a link at each level, a FIFO, a hard link, a
// stranger's file) is refused with its anchor, and nothing outside the
// state directory changes.
func TestMakeRefusesPlanted(t *testing.T) {
	needRoot(t)
	for _, c := range []struct {
		name, anchor string
		plant        func(t *testing.T, state, out string, u Users)
	}{
		{"a table directory is a link", "layout-link", func(t *testing.T, s, out string, u Users) {
			swapLink(t, Audit.In(s), out)
		}},
		{"a table directory outside any listing is a link", "layout-link", func(t *testing.T, s, out string, u Users) {
			swapLink(t, GatewaySecrets.In(s), out)
		}},
		{"a directory inside a role's is a link", "layout-link", func(t *testing.T, s, out string, u Users) {
			if err := os.Symlink(out, filepath.Join(Memory.In(s), "edits")); err != nil {
				t.Fatal(err)
			}
		}},
		{"a file in a role's directory is a link", "layout-link", func(t *testing.T, s, out string, u Users) {
			if err := os.Symlink(filepath.Join(out, "notes.md"), filepath.Join(Memory.In(s), "notes.md")); err != nil {
				t.Fatal(err)
			}
		}},
		{"the journal is a link", "layout-link", func(t *testing.T, s, out string, u Users) {
			edits := filepath.Join(Memory.In(s), "edits")
			if err := os.Mkdir(edits, 0o700); err != nil {
				t.Fatal(err)
			}
			give(t, u, Memoryd, edits)
			if err := os.Symlink(filepath.Join(out, "journal.jsonl"), Journal.In(s)); err != nil {
				t.Fatal(err)
			}
		}},
		{"a FIFO in a role's directory", "layout-kind", func(t *testing.T, s, out string, u Users) {
			p := filepath.Join(Memory.In(s), "notes.md")
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
			give(t, u, Memoryd, p)
		}},
		{"a FIFO for the journal", "layout-kind", func(t *testing.T, s, out string, u Users) {
			edits := filepath.Join(Memory.In(s), "edits")
			if err := os.Mkdir(edits, 0o700); err != nil {
				t.Fatal(err)
			}
			give(t, u, Memoryd, edits)
			if err := syscall.Mkfifo(Journal.In(s), 0o600); err != nil {
				t.Fatal(err)
			}
			give(t, u, Memoryd, Journal.In(s))
		}},
		{"a FIFO for a config", "layout-kind", func(t *testing.T, s, out string, u Users) {
			if err := syscall.Mkfifo(ConfigFile(Loopd).In(s), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"a file where the table wants a directory", "layout-kind", func(t *testing.T, s, out string, u Users) {
			if err := os.Remove(GatewaySecrets.In(s)); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(GatewaySecrets.In(s), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			give(t, u, Gatewayd, GatewaySecrets.In(s))
		}},
		{"a hard link to root's file", "layout-link", func(t *testing.T, s, out string, u Users) {
			if err := os.Link(filepath.Join(out, "token"), filepath.Join(GatewaySecrets.In(s), "token")); err != nil {
				t.Fatal(err)
			}
		}},
		{"a stranger's file", "layout-owner", func(t *testing.T, s, out string, u Users) {
			p := filepath.Join(Broker.In(s), "audit.head")
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(p, 4242, 4242); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			state, u := perRole(t)
			out := outside(t)
			c.plant(t, state, out, u)
			err := Make(state, u)
			t.Logf("Make = %v", err)
			if err == nil || !strings.HasSuffix(err.Error(), "see docs/runbook.md#"+c.anchor) {
				t.Errorf("Make = %v, want a refusal pointing at #%s", err, c.anchor)
			}
			untouched(t, out)
		})
	}
}

// TestMakePassesOverOwnersLinks: a link in a directory of the owner's
// (a grant linked into the Nix store) is neither followed nor refused.
func TestMakePassesOverOwnersLinks(t *testing.T) {
	needRoot(t)
	state, u := perRole(t)
	out := outside(t)
	if err := os.Symlink(filepath.Join(out, "victim"), filepath.Join(Grants.In(state), "store.toml")); err != nil {
		t.Fatal(err)
	}
	if err := Make(state, u); err != nil {
		t.Errorf("Make with a linked grant = %v", err)
	}
	untouched(t, out)
}

// TestMakeRace: a role that swaps an entry for a link at the moment
// after Make judged it, or after Make listed its directory, changes
// nothing outside the state directory: Make acts on the descriptors it
// opened, never on the path again.
func TestMakeRace(t *testing.T) {
	needRoot(t)
	for _, c := range []struct {
		name       string
		step, path string // when to swap
		prepare    func(t *testing.T, state string, u Users)
		swap       func(t *testing.T, state, out string)
	}{
		{"a directory swapped after it was listed", "listed", Audit.Path,
			func(t *testing.T, s string, u Users) {
				p := filepath.Join(Audit.In(s), "victim")
				if err := os.WriteFile(p, nil, 0o600); err != nil {
					t.Fatal(err)
				}
				give(t, u, Brokerd, p)
			},
			func(t *testing.T, s, out string) { swapLink(t, Audit.In(s), out) }},
		{"a file swapped after it was judged", "checked", Memory.Path + "/notes.md",
			func(t *testing.T, s string, u Users) {
				// The owner's file, which Make gives memoryd.
				if err := os.WriteFile(filepath.Join(Memory.In(s), "notes.md"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			},
			func(t *testing.T, s, out string) {
				swapLink(t, filepath.Join(Memory.In(s), "notes.md"), filepath.Join(out, "notes.md"))
			}},
		{"a table directory swapped after it was judged", "checked", Audit.Path,
			func(t *testing.T, s string, u Users) {
				if err := os.Chmod(Audit.In(s), 0o750); err != nil { // so Make changes it
					t.Fatal(err)
				}
			},
			func(t *testing.T, s, out string) { swapLink(t, Audit.In(s), out) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			state, u := perRole(t)
			out := outside(t)
			c.prepare(t, state, u)
			fired := false
			TestOnlyMakeStep = func(step, path string) {
				if step == c.step && path == c.path && !fired {
					fired = true
					c.swap(t, state, out)
				}
			}
			defer func() { TestOnlyMakeStep = nil }()
			err := Make(state, u)
			t.Logf("Make = %v", err)
			if !fired {
				t.Fatalf("Make never reached %s %s (err %v)", c.step, c.path, err)
			}
			untouched(t, out)
		})
	}
}

// TestOpenLog: bxctl up appends a role's output to logs/<role>.log
// through a descriptor it hands the role; a link, FIFO or hard link put
// in the log's place is refused and its target left as it was.
func TestOpenLog(t *testing.T) {
	needRoot(t)
	state, u := perRole(t)
	f, err := OpenLog(state, Loopd, u)
	if err != nil {
		t.Fatalf("OpenLog = %v", err)
	}
	f.Close()
	if fi, err := os.Lstat(filepath.Join(Logs.In(state), "loopd.log")); err != nil || fi.Mode() != 0o600 {
		t.Errorf("loopd.log = %v, %v; want a 0600 file", fi, err)
	}
	for _, c := range []struct {
		name, anchor string
		plant        func(t *testing.T, log, out string)
	}{
		{"a link", "layout-link", func(t *testing.T, log, out string) {
			if err := os.Symlink(filepath.Join(out, "victim"), log); err != nil {
				t.Fatal(err)
			}
		}},
		{"a FIFO", "layout-kind", func(t *testing.T, log, out string) {
			if err := syscall.Mkfifo(log, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"a hard link", "layout-link", func(t *testing.T, log, out string) {
			if err := os.Link(filepath.Join(out, "victim"), log); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := outside(t)
			log := filepath.Join(Logs.In(state), Brokerd+".log")
			os.Remove(log)
			c.plant(t, log, out)
			f, err := OpenLog(state, Brokerd, u)
			if err == nil {
				f.WriteString("a role's output\n")
				f.Close()
			}
			if err == nil || !strings.HasSuffix(err.Error(), "see docs/runbook.md#"+c.anchor) {
				t.Errorf("OpenLog = %v, want a refusal pointing at #%s", err, c.anchor)
			}
			untouched(t, out)
		})
	}
}

// BenchmarkMake: one Make over a per-role state directory that already
// is as the table says, with 1000 files in memory/ (what each `bxctl up`
// and re-run of `bxctl install` pays).
func BenchmarkMake(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: it gives files to the role users")
	}
	u := DefaultUsers(ID{})
	state := filepath.Join(b.TempDir(), "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		b.Fatal(err)
	}
	if err := Make(state, u); err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		if err := os.WriteFile(filepath.Join(Memory.In(state), fmt.Sprintf("n%d.md", i)), nil, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if err := Make(state, u); err != nil {
			b.Fatal(err)
		}
	}
}

// TestMakeStateRoot: the state directory itself must not be a link (as
// before the descriptor walk), but the directories above it are the
// owner's choice and a link among them is followed.
func TestMakeStateRoot(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.MkdirAll(filepath.Join(real, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "above")); err != nil {
		t.Fatal(err)
	}
	if err := Make(filepath.Join(dir, "above", "state"), me()); err != nil {
		t.Errorf("Make through a link above the state directory = %v", err)
	}
	if err := os.Symlink(filepath.Join(real, "state"), filepath.Join(dir, "state")); err != nil {
		t.Fatal(err)
	}
	err := Make(filepath.Join(dir, "state"), me())
	if err == nil || !strings.HasSuffix(err.Error(), "see docs/runbook.md#layout-link") {
		t.Errorf("Make on a state directory that is a link = %v, want #layout-link", err)
	}
}
