package layout

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A plant is what a role may put at a path in a directory it writes.
type plant int

const (
	linkFile     plant = iota // a symbolic link to root's file outside
	linkDir                   // a symbolic link to root's directory outside
	swapFile                  // the entry moved aside, a link to root's file in its place
	swapDir                   // the entry moved aside, a link to root's directory in its place
	fifo                      // a FIFO
	hardLink                  // a hard link to root's file outside
	roleFile                  // a regular file of the role's, 0644
	ownerFile                 // a regular file of root's (the owner's), 0644
	strangerFile              // a regular file of uid 4242
	roleDir                   // a directory of the role's
	plants
)

// plantTargets are paths in directories a role writes, and that role.
var plantTargets = []struct{ path, role string }{
	{"broker/audit", Brokerd}, {"broker/consult", Brokerd}, {"broker/audit.head", Brokerd},
	{"broker/audit/x.jsonl", Brokerd}, {"memory/notes.md", Memoryd}, {"memory/edits", Memoryd},
	{"memory/edits/journal.jsonl", Memoryd}, {"index/fleet.db", Memoryd}, {"gateway/cursor.json", Gatewayd},
	{"secrets/gatewayd/token", Gatewayd}, {"loop/jobs.json", Loopd}, {"sessions/s1", Loopd},
}

// put plants k at target in state, as target's role would; nothing when
// the target's directory is not (or no longer) a real one inside state,
// since the role could not write there either.
func put(t *testing.T, state, out string, u Users, target int, k plant) {
	t.Helper()
	tg := plantTargets[target%len(plantTargets)]
	p := filepath.Join(state, filepath.FromSlash(tg.path))
	real, err := filepath.EvalSymlinks(filepath.Dir(p))
	if err != nil || (real != state && !strings.HasPrefix(real, state+string(filepath.Separator))) {
		return
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return // a FIFO planted where a directory was: opening it would block
	}
	if k == swapFile || k == swapDir {
		if os.Rename(p, p+".real") != nil {
			return
		}
	} else if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
	id := u.Of(tg.role)
	var mk error
	switch k {
	case linkFile, swapFile:
		mk = os.Symlink(filepath.Join(out, "victim"), p)
	case linkDir, swapDir:
		mk = os.Symlink(out, p)
	case fifo:
		mk = syscall.Mkfifo(p, 0o600)
	case hardLink:
		mk = os.Link(filepath.Join(out, "victim"), p)
	case roleFile, ownerFile, strangerFile:
		mk = os.WriteFile(p, nil, 0o644)
	case roleDir:
		mk = os.Mkdir(p, 0o700)
	}
	if mk != nil {
		t.Fatal(mk)
	}
	switch k {
	case ownerFile, hardLink:
	case strangerFile:
		mk = os.Lchown(p, 4242, 4242)
	default:
		mk = os.Lchown(p, int(id.UID), int(id.GID))
	}
	if mk != nil {
		t.Fatal(mk)
	}
}

// FuzzMakeStaysInside: whatever roles plant in the directories they
// write, before Make or at any step where Make lets a racer act, Make
// changes nothing outside the state directory; and when they planted
// before it and Make accepted, Verify finds nothing wrong. b[0] is the
// step to plant at (0: before Make), then pairs of target and plant.
func FuzzMakeStaysInside(f *testing.F) {
	for _, seed := range [][]byte{
		{0, 5, byte(linkDir)}, {0, 4, byte(fifo)}, {0, 4, byte(ownerFile), 6, byte(ownerFile)},
		{0, 5, byte(roleDir), 6, byte(linkFile)}, {0, 9, byte(hardLink)}, {0, 2, byte(strangerFile)},
		{0, 0, byte(roleFile)}, {0, 7, byte(ownerFile), 8, byte(roleFile), 10, byte(ownerFile)},
		{12, 0, byte(swapDir)}, {14, 4, byte(swapFile)}, {20, 9, byte(swapDir)}, {9, 1, byte(swapDir), 2, byte(linkFile)},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		needRoot(t)
		if len(b) < 3 || len(b) > 9 {
			return
		}
		state, u := perRole(t)
		out := outside(t)
		// Files Make will adopt: so it has something to change.
		put(t, state, out, u, 4, ownerFile)
		put(t, state, out, u, 9, ownerFile)
		plantAll := func() {
			for i := 1; i+1 < len(b); i += 2 {
				put(t, state, out, u, int(b[i]), plant(int(b[i+1])%int(plants)))
			}
		}
		when, n := int(b[0])%64, 0
		if when == 0 {
			plantAll()
		}
		TestOnlyMakeStep = func(step, path string) {
			if n++; n == when {
				plantAll()
			}
		}
		defer func() { TestOnlyMakeStep = nil }()
		err := Make(state, u)
		untouched(t, out)
		if when == 0 && err == nil {
			if ps := Verify(state, u); len(ps) != 0 {
				t.Errorf("Make accepted what was planted, but Verify finds %v", ps)
			}
		}
	})
}
