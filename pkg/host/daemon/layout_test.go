package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// TestMainChecksTheLayout: every daemon's Main checks its own entries
// of the state directory its config is in before it runs, and refuses
// (exit 2, with the runbook pointer) a group-writable one, a link, or a
// config its role does not own as the table says.
func TestMainChecksTheLayout(t *testing.T) {
	me := layout.SingleUser(layout.ID{UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())})
	for _, c := range []struct {
		name, want string
		plant      func(state string) error
	}{
		{"as the table says", "", func(string) error { return nil }},
		{"group-writable", "layout-writable", func(s string) error { return os.Chmod(layout.Sessions.In(s), 0o770) }},
		{"symbolic link", "layout-link", func(s string) error {
			os.Remove(layout.LoopRun.In(s))
			return os.Symlink(t.TempDir(), layout.LoopRun.In(s))
		}},
		{"config mode", "layout-writable", func(s string) error { return os.Chmod(layout.ConfigFile("loopd").In(s), 0o660) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "state")
			if err := os.MkdirAll(layout.Config.In(state), 0o700); err != nil {
				t.Fatal(err)
			}
			cfg := layout.ConfigFile("loopd").In(state)
			os.WriteFile(cfg, nil, 0o600)
			if err := layout.Make(state, me); err != nil {
				t.Fatal(err)
			}
			if err := c.plant(state); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			ran := false
			code := Main("loopd", []string{"-config", cfg}, &out, func(ctx context.Context, log *slog.Logger, f Flags) error {
				ran = true
				if f.State != state {
					t.Errorf("State = %q, want %q", f.State, state)
				}
				return nil
			})
			if c.want == "" {
				if code != ExitOK || !ran {
					t.Errorf("Main = %d (ran %v): %s", code, ran, out.String())
				}
				return
			}
			if code != ExitRefused || ran || !strings.Contains(out.String(), "see docs/runbook.md#"+c.want) {
				t.Errorf("Main = %d (ran %v), log %s; want a refusal pointing at #%s", code, ran, out.String(), c.want)
			}
		})
	}
}

// TestMainUmask: the role's run sees the umask the layout table gives
// it, so a file a library makes with its own default mode (SQLite's
// 0644) has the table's mode from its first byte; Main restores the
// caller's umask when run returns.
func TestMainUmask(t *testing.T) {
	me := layout.SingleUser(layout.ID{UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())})
	state := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(layout.Config.In(state), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := layout.ConfigFile("memoryd").In(state)
	os.WriteFile(cfg, nil, 0o600)
	if err := layout.Make(state, me); err != nil {
		t.Fatal(err)
	}
	before := syscall.Umask(0o022)
	defer syscall.Umask(before)
	var out bytes.Buffer
	code := Main("memoryd", []string{"-config", cfg}, &out, func(ctx context.Context, log *slog.Logger, f Flags) error {
		p := filepath.Join(layout.Index.In(state), "made-like-sqlite")
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			return err
		}
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if got := fi.Mode().Perm(); got != 0o600 {
			t.Errorf("a file made 0644 under memoryd's Main has mode %#o, want 0600", got)
		}
		return nil
	})
	if code != ExitOK {
		t.Fatalf("Main = %d: %s", code, out.String())
	}
	if now := syscall.Umask(0o022); now != 0o022 {
		t.Errorf("umask after Main = %#o, want the caller's 022 back", now)
	}
}
