package runner

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
)

// TestNamedEntriesRefuseWrites names the four directories issue 19
// names, by path, rather than through the table (which
// TestEveryLayoutEntryIsProtected walks): a write_file under jobs/,
// grants/, memory/ or sessions/ is refused with mount-protected though
// an auto grant covers the path, and it would still be if one of them
// left the table.
func TestNamedEntriesRefuseWrites(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	named := []string{"jobs", "grants", "memory", "sessions"}
	for _, d := range named {
		if err := os.MkdirAll(filepath.Join(state, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Config{Runner: brokerd.Runner{PodmanSocket: "/nonexistent/podman.sock", ToolImage: testImage}}
	p, err := New(cfg, "i", filepath.Join(t.TempDir(), "work"), layout.In(state), nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range named {
		f := filepath.Join(state, d, "planted.toml")
		dec := decide(t, autoGrant("g", "write_file", []string{filepath.Join(state, d)}), "write_file", map[string]string{"path": f, "content": "mode = \"auto\""})
		if problem, err := checkMounts(dec, p.protected); !errors.Is(err, ErrProtected) || problem != "" {
			t.Errorf("write_file %s under a covering grant: checkMounts = %q, %v; want ErrProtected", f, problem, err)
		}
	}
}
