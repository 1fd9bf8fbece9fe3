package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// madeState is a state directory made as the table says for one user,
// with loopd's config in it: what Main needs to run a role's body.
func madeState(t *testing.T) (state, cfg string) {
	t.Helper()
	me := layout.SingleUser(layout.ID{UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())})
	state = filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(layout.Config.In(state), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg = layout.ConfigFile("loopd").In(state)
	os.WriteFile(cfg, nil, 0o600)
	if err := layout.Make(state, me); err != nil {
		t.Fatal(err)
	}
	return state, cfg
}

func TestMainExitCodes(t *testing.T) {
	state, cfg := madeState(t)
	tests := []struct {
		name string
		args []string
		err  error
		want int
		log  string
	}{
		{"ok", []string{"-config", cfg}, nil, ExitOK, `"msg":"stopped"`},
		{"failed", []string{"-config", cfg}, errors.New("boom"), ExitFailed, `"err":"boom"`},
		{"refused", []string{"-config", cfg}, fmt.Errorf("config: %w", ErrRefused), ExitRefused, `"msg":"refused to start"`},
		{"bad flag", []string{"-nope"}, nil, ExitRefused, "flag provided but not defined"},
		{"extra args", []string{"x"}, nil, ExitRefused, "unexpected arguments"},
		// The default config is outside any state directory: refused,
		// never run with paths of no table's.
		{"no state directory", nil, nil, ExitRefused, "-state is not set and the config /etc/boxmaker/loopd.toml is not STATE/config/loopd.toml; every socket and state path is the layout table's under a state directory; see docs/runbook.md#state-dir-missing"},
		{"-state", []string{"-state", state}, nil, ExitOK, `"msg":"stopped"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			got := Main("loopd", tt.args, &out, func(ctx context.Context, log *slog.Logger, f Flags) error {
				if f.State != state {
					t.Errorf("state = %q, want %q", f.State, state)
				}
				return tt.err
			})
			if got != tt.want || !strings.Contains(out.String(), tt.log) {
				t.Errorf("Main = %d, log %q; want %d and %q", got, out.String(), tt.want, tt.log)
			}
		})
	}
}

// TestLoad: a role's config goes through its loader with the state
// directory; each key it accepted but the owner should delete is one
// warning; a loader's refusal is Main's.
func TestLoad(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&out, nil))
	f := Flags{Config: "c.toml", State: "/s"}
	c, err := Load(f, log, func(path, state string) (string, []string, error) {
		return path + "@" + state, []string{"config c.toml: key x is no longer read"}, nil
	})
	if err != nil || c != "c.toml@/s" || !strings.Contains(out.String(), `"level":"WARN","msg":"config c.toml: key x is no longer read"`) {
		t.Errorf("Load = %q, %v; log %s", c, err, out.String())
	}
	_, err = Load(f, log, func(string, string) (string, []string, error) { return "", nil, errors.New("config c.toml: bad") })
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "config c.toml: bad") {
		t.Errorf("Load of a refused config = %v, want a refusal", err)
	}
}

// TestRefuse: the one way to mark a startup failure keeps its text, is a
// refusal to Main, and does not expose its cause's chain.
func TestRefuse(t *testing.T) {
	cause := errors.New("config: bad key")
	err := Refuse(cause)
	_, cfg := madeState(t)
	if !errors.Is(err, ErrRefused) || errors.Is(err, cause) || err.Error() != "refused to start: config: bad key" {
		t.Errorf("Refuse(%v) = %v (Is ErrRefused %v, Is cause %v)", cause, err, errors.Is(err, ErrRefused), errors.Is(err, cause))
	}
	var out bytes.Buffer
	if got := Main("loopd", []string{"-config", cfg}, &out, func(context.Context, *slog.Logger, Flags) error { return err }); got != ExitRefused {
		t.Errorf("Main = %d, want ExitRefused", got)
	}
}

// TestOwnerUID: with a user per role the owner whose files are believed
// is users.toml's, and a configured owner_uid naming anyone else, above
// all a role's uid, is a refusal naming that role; with one user the
// config decides.
func TestOwnerUID(t *testing.T) {
	per := Flags{Config: "c.toml", State: "/s", Users: layout.DefaultUsers(layout.ID{UID: 0, GID: 0})}
	got, err := per.OwnerUID("owner_uid", nil)
	if err != nil || got == nil || *got != 0 {
		t.Errorf("per-role, unset: %v, %v; want users.toml's owner, 0", got, err)
	}
	loopd := per.Users.Of(layout.Loopd).UID
	if _, err := per.OwnerUID("[jobs] owner_uid", &loopd); err == nil || !strings.Contains(err.Error(), "loopd's") || !strings.Contains(err.Error(), "see docs/runbook.md#layout-owner-uid") {
		t.Errorf("per-role, loopd's uid: %v; want a refusal naming loopd", err)
	}
	stranger := uint32(4242)
	if _, err := per.OwnerUID("owner_uid", &stranger); err == nil {
		t.Error("per-role, a uid not the owner's: accepted")
	}
	zero := uint32(0)
	if got, err := per.OwnerUID("owner_uid", &zero); err != nil || *got != 0 {
		t.Errorf("per-role, the owner's own uid: %v, %v", got, err)
	}
	one := Flags{Config: "c.toml", State: "/s", Users: layout.SingleUser(layout.ID{UID: 1000, GID: 1000})}
	if got, err := one.OwnerUID("owner_uid", nil); err != nil || got != nil {
		t.Errorf("one user, unset: %v, %v; want nil (this daemon's own uid)", got, err)
	}
}
