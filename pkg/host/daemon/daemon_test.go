package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/layout"
)

func TestMainExitCodes(t *testing.T) {
	tests := []struct {
		name string
		args []string
		err  error
		want int
		log  string
	}{
		{"ok", nil, nil, ExitOK, `"msg":"stopped"`},
		{"failed", nil, errors.New("boom"), ExitFailed, `"err":"boom"`},
		{"refused", nil, fmt.Errorf("config: %w", ErrRefused), ExitRefused, `"msg":"refused to start"`},
		{"bad flag", []string{"-nope"}, nil, ExitRefused, "flag provided but not defined"},
		{"extra args", []string{"x"}, nil, ExitRefused, "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			got := Main("testd", tt.args, &out, func(ctx context.Context, log *slog.Logger, f Flags) error {
				if f.Config != "/etc/boxmaker/testd.toml" {
					t.Errorf("default config = %q", f.Config)
				}
				return tt.err
			})
			if got != tt.want || !strings.Contains(out.String(), tt.log) {
				t.Errorf("Main = %d, log %q; want %d and %q", got, out.String(), tt.want, tt.log)
			}
		})
	}
}

// TestRefuse: the one way to mark a startup failure keeps its text, is a
// refusal to Main, and does not expose its cause's chain.
func TestRefuse(t *testing.T) {
	cause := errors.New("config: bad key")
	err := Refuse(cause)
	if !errors.Is(err, ErrRefused) || errors.Is(err, cause) || err.Error() != "refused to start: config: bad key" {
		t.Errorf("Refuse(%v) = %v (Is ErrRefused %v, Is cause %v)", cause, err, errors.Is(err, ErrRefused), errors.Is(err, cause))
	}
	var out bytes.Buffer
	if got := Main("testd", nil, &out, func(context.Context, *slog.Logger, Flags) error { return err }); got != ExitRefused {
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
