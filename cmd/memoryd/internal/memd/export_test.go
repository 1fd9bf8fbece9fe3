package memd

import (
	"path/filepath"

	"wntrmute.dev/boxmaker/cmd/memoryd/internal/recall"
)

func openIndexForTest(cfg Config) (*recall.Index, error) {
	return recall.Open(filepath.Join(cfg.StateDir, "index", "recall.db"), cfg.maxClass, nil)
}
