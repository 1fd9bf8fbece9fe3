package layout

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestGiveSocket: the Podman socket becomes root:brokerd 0660; a link in
// its place, or in place of its directory, is refused and its target
// left as it was.
func TestGiveSocket(t *testing.T) {
	needRoot(t)
	listen := func(t *testing.T, p string) {
		ln, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
	}
	t.Run("given", func(t *testing.T) {
		state, u := perRole(t)
		listen(t, PodmanRun.SocketIn(state))
		if err := GiveSocket(state, &PodmanRun, u); err != nil {
			t.Fatalf("GiveSocket = %v", err)
		}
		fi, err := os.Lstat(PodmanRun.SocketIn(state))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != 0 || st.Gid != u.Of(Brokerd).GID || fi.Mode().Perm() != 0o660 {
			t.Errorf("podman.sock is uid %d gid %d mode %v, want 0:%d 0660", st.Uid, st.Gid, fi.Mode(), u.Of(Brokerd).GID)
		}
	})
	for _, c := range []struct {
		name, anchor string
		plant        func(t *testing.T, state, out string)
	}{
		{"the socket is a link", "layout-link", func(t *testing.T, s, out string) {
			if err := os.Symlink(filepath.Join(out, "victim"), PodmanRun.SocketIn(s)); err != nil {
				t.Fatal(err)
			}
		}},
		{"the socket is a file", "layout-kind", func(t *testing.T, s, out string) {
			if err := os.WriteFile(PodmanRun.SocketIn(s), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"its directory is a link", "layout-link", func(t *testing.T, s, out string) {
			listen(t, filepath.Join(out, PodmanRun.Socket))
			swapLink(t, PodmanRun.In(s), out)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			state, u := perRole(t)
			out := outside(t)
			c.plant(t, state, out)
			err := GiveSocket(state, &PodmanRun, u)
			if err == nil || !strings.HasSuffix(err.Error(), "see docs/runbook.md#"+c.anchor) {
				t.Errorf("GiveSocket = %v, want a refusal pointing at #%s", err, c.anchor)
			}
			if fi, err := os.Lstat(filepath.Join(out, PodmanRun.Socket)); err == nil {
				if st := fi.Sys().(*syscall.Stat_t); st.Gid != 0 {
					t.Errorf("the socket outside now has group %d", st.Gid)
				}
				os.Remove(filepath.Join(out, PodmanRun.Socket)) // untouched checks files only
			}
			untouched(t, out)
		})
	}
}
