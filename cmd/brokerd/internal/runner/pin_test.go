package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"wntrmute.dev/boxmaker/checks/podmantest"
)

// TestSwappedMountNeverRuns: a mount path replaced between the mount
// check and the mount (by a fresh directory, or by a link, which the
// runtime would follow) is caught after start, by device and inode
// through the container's root, before the tool gets its input: the
// call fails closed and leaves nothing (review item 1).
func TestSwappedMountNeverRuns(t *testing.T) {
	svc := podmantest.Require(t)
	image := svc.ToolImage(t)
	for _, swap := range []struct {
		name string
		do   func(path, elsewhere string) error
	}{
		{"a new directory", func(path, _ string) error {
			if err := os.Rename(path, path+"-old"); err != nil {
				return err
			}
			return os.Mkdir(path, 0o755)
		}},
		{"a link", func(path, elsewhere string) error {
			if err := os.Rename(path, path+"-old"); err != nil {
				return err
			}
			return os.Symlink(elsewhere, path)
		}},
	} {
		t.Run(swap.name, func(t *testing.T) {
			p := newRunner(t, svc, image, nil)
			base, elsewhere := t.TempDir(), t.TempDir()
			work := filepath.Join(base, "w")
			os.Mkdir(work, 0o755)
			os.WriteFile(filepath.Join(elsewhere, "secret"), []byte("host-only"), 0o644)
			p.afterPin = func() {
				if err := swap.do(work, elsewhere); err != nil {
					t.Error(err)
				}
			}
			d := decide(t, autoGrant("s", "shell", []string{work}), "shell", map[string]string{"command": "cat secret", "workdir": work})
			out, err := p.Run(context.Background(), d)
			t.Logf("refused: %v", err)
			if !errors.Is(err, ErrIsolation) || out.Stdout != "" {
				t.Errorf("Run after a swap = %+v, %v; want ErrIsolation and no output", out, err)
			}
			if l := leftovers(t, svc, p); len(l) > 0 {
				t.Errorf("containers left behind: %v", l)
			}
		})
	}
}
