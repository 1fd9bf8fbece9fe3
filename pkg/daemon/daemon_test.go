package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
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
