package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"wntrmute.dev/boxmaker/cmd/bxctl/internal/up"
)

// Where the state directory is; what is in it is package layout's table.
const (
	stateEnv     = "BOXMAKER_STATE"
	defaultState = ".boxmaker"
)

// resolveState resolves --state: the flag, else $BOXMAKER_STATE, else
// up.DevRoot/state as root (where the role users can reach it, wherever the
// clone is), else ./.boxmaker, made absolute (configs hold absolute
// paths).
func resolveState(flagValue string) (string, error) {
	d := flagValue
	if d == "" {
		d = os.Getenv(stateEnv)
	}
	if d == "" && os.Geteuid() == 0 {
		d = filepath.Join(up.DevRoot, "state")
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
