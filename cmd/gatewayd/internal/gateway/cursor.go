package gateway

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

// cursor is gatewayd's durable record of the posts it has handled, so
// that a restart fetches what arrived while it was stopped and handles
// none twice: the newest create_at handled, and the ids of the newest
// handled posts (those within the fetch margin of it are what a restart
// must not handle again). It is written atomically (a temporary file,
// fsynced, renamed over the old one, the directory fsynced) each time a
// post is marked handled, before the post reaches loopd or the command
// parser, so a crash can lose at most the post being handed over, never
// answer one twice.
type cursor struct {
	path string

	mu    sync.Mutex // guards state and the file's writes
	state cursorState
}

// cursorState is cursor.json.
type cursorState struct {
	Since   int64    `json:"since"`   // the newest create_at handled, in ms
	Handled []string `json:"handled"` // the newest handled post ids, oldest first, at most maxCursorIDs
}

// maxCursorIDs bounds the ids kept: more than one gap margin's worth of
// posts even in a busy chat.
const maxCursorIDs = 512

// openCursor reads the cursor in dir; a missing file is a first start
// (since 0: nothing is fetched).
func openCursor(dir string) (*cursor, error) {
	c := &cursor{path: filepath.Join(dir, "cursor.json")}
	if err := readOwn(c.path, "cursor", "gateway-cursor", &c.state); err != nil {
		return nil, err
	}
	if len(c.state.Handled) > maxCursorIDs {
		return nil, fmt.Errorf("read cursor %s: not a cursor gatewayd wrote (%d ids, over %d); see docs/runbook.md#gateway-cursor", c.path, len(c.state.Handled), maxCursorIDs)
	}
	return c, nil
}

// readOwn decodes path, one of gatewayd's own records (what names it,
// anchor is its runbook entry), strictly into v; a missing file leaves v
// as it is. It refuses a file that is not regular, not gatewayd's user's,
// or writable by group or others: a record someone else could have
// written is not believed.
func readOwn(path, what, anchor string, v any) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("read %s: %v; see docs/runbook.md#%s", what, err, anchor)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o022 != 0 || !ok || int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("read %s %s: not a regular file owned by gatewayd's user and writable only by it (mode %v); see docs/runbook.md#%s", what, path, fi.Mode(), anchor)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %v; see docs/runbook.md#%s", what, err, anchor)
	}
	if err := strict.Unmarshal(b, v); err != nil {
		return fmt.Errorf("read %s %s: not a record gatewayd wrote (%v); see docs/runbook.md#%s", what, path, err, anchor)
	}
	return nil
}

// since is the newest create_at handled (0 before the first post).
func (c *cursor) since() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state.Since
}

// handled reports whether id is among the handled ids recorded.
func (c *cursor) handled(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.state.Handled, id)
}

// mark records post id (created at createAt) as handled, durably.
func (c *cursor) mark(id string, createAt int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state.Handled = append(c.state.Handled, id)
	if n := len(c.state.Handled); n > maxCursorIDs {
		c.state.Handled = slices.Delete(c.state.Handled, 0, n-maxCursorIDs)
	}
	c.state.Since = max(c.state.Since, createAt)
	b, err := strict.Marshal(c.state)
	if err != nil {
		return fmt.Errorf("write cursor: %v", err)
	}
	if err := writeAtomic(c.path, b); err != nil {
		return fmt.Errorf("write cursor: %v", err)
	}
	return nil
}

// writeAtomic replaces path with b: all of it or none, durable on return.
func writeAtomic(path string, b []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("replace %s: %v", path, err)
	}
	tmp := f.Name()
	_, werr := f.Write(b)
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("replace %s: %v", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("replace %s: %v", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("replace %s: %v", path, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("replace %s: %v", path, err)
	}
	return nil
}
