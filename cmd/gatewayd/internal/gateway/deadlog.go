package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/mattermost"
	"wntrmute.dev/boxmaker/pkg/jsonl"
)

// deadLog lists the approval posts this run made, so that the next run
// can mark them dead: a restart must not leave posts that look
// answerable and are not.
type deadLog struct {
	w *jsonl.Writer
}

type deadRecord struct {
	ID    int64    `json:"id"`
	Posts []string `json:"posts"`
}

// openDeadLog edits every post the previous run listed to say it is dead,
// then starts a new list.
func openDeadLog(ctx context.Context, dir string, mm *mattermost.Client, log *slog.Logger) (*deadLog, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "approvals.jsonl")
	err := jsonl.Scan(path, 1<<20, func(line int, b []byte) error {
		var r deadRecord
		if err := json.Unmarshal(b, &r); err != nil {
			return nil // a torn last line: nothing to mark
		}
		for _, id := range r.Posts {
			msg := fmt.Sprintf("~~Approval %d~~: dead. gatewayd restarted; if the call still waits, brokerd posts it again. `bxctl approvals` shows what waits.", r.ID)
			if err := mm.PatchMessage(ctx, id, msg); err != nil {
				log.Warn("marking an old approval post dead failed", "post", id, "err", err.Error())
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %v", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	w, err := jsonl.Open(path)
	if err != nil {
		return nil, err
	}
	return &deadLog{w: w}, nil
}

func (d *deadLog) add(id int64, posts []string) error {
	_, err := d.w.Append(deadRecord{ID: id, Posts: posts})
	return err
}
