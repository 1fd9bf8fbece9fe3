package gateway

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"wntrmute.dev/boxmaker/pkg/strict"
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
	b, err := os.ReadFile(c.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return c, nil
	case err != nil:
		return nil, fmt.Errorf("read cursor: %v; see docs/runbook.md#gateway-cursor", err)
	}
	if err := strict.Unmarshal(b, &c.state); err != nil || len(c.state.Handled) > maxCursorIDs {
		return nil, fmt.Errorf("read cursor %s: not a cursor gatewayd wrote (%v); see docs/runbook.md#gateway-cursor", c.path, err)
	}
	return c, nil
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
