package cli

import (
	"fmt"
	"os"
	"path/filepath"
)

// The layout of a state directory, shared by every bxctl command and by
// the configs `bxctl up` writes.
const (
	stateEnv     = "BOXMAKER_STATE"
	defaultState = ".boxmaker"
)

// resolveState resolves --state: the flag, else $BOXMAKER_STATE, else
// ./.boxmaker, made absolute (configs hold absolute paths).
func resolveState(flagValue string) (string, error) {
	d := flagValue
	if d == "" {
		d = os.Getenv(stateEnv)
	}
	if d == "" {
		d = defaultState
	}
	abs, err := filepath.Abs(d)
	if err != nil {
		return "", fmt.Errorf("state directory: %w", err)
	}
	return abs, nil
}

// socketDir is where a socket pair's directory sits in a state directory.
func socketDir(state, pair string) string { return filepath.Join(state, "run", pair) }

// loopSocket is loopd's socket in a state directory.
func loopSocket(state string) string { return filepath.Join(socketDir(state, "loop"), "loop.sock") }
