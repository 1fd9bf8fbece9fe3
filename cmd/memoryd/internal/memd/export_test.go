package memd

import (
	"wntrmute.dev/boxmaker/cmd/memoryd/internal/recall"
	"wntrmute.dev/boxmaker/pkg/host/layout"
)

func openIndexForTest(cfg Config) (*recall.Index, error) {
	return recall.Open(layout.RecallIndex(cfg.StateDir), cfg.maxClass, nil)
}
