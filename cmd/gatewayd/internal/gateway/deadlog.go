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
	"wntrmute.dev/boxmaker/pkg/logs/jsonl"
)

// deadLog lists the approval posts this run made, each as soon as it is
// created, and which of them were finished (edited to show an outcome),
// so that the next run can mark the others dead: a restart, or a crash
// between two parts, must not leave posts that look answerable and are
// not, and must not overwrite an outcome already shown.
type deadLog struct {
	w *jsonl.Writer
}

// deadRecord is one line: posts made for approval ID, or, with Finished,
// posts whose outcome is shown. A line of an older run without Finished
// lists posts made.
type deadRecord struct {
	ID       int64    `json:"id"`
	Posts    []string `json:"posts"`
	Finished bool     `json:"finished,omitempty"`
}

// openDeadLog edits every post the previous run made and did not finish
// to say it is dead, then starts a new list.
func openDeadLog(ctx context.Context, dir string, mm *mattermost.Client, log *slog.Logger) (*deadLog, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "approvals.jsonl")
	type live struct {
		id   int64
		post string
	}
	var order []live
	pending := map[string]bool{}
	err := jsonl.Scan(path, 1<<20, func(line int, b []byte) error {
		var r deadRecord
		if err := json.Unmarshal(b, &r); err != nil {
			return nil // a torn last line: nothing to mark
		}
		for _, id := range r.Posts {
			if r.Finished {
				delete(pending, id)
				continue
			}
			if !pending[id] {
				pending[id] = true
				order = append(order, live{r.ID, id})
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %v", path, err)
	}
	for _, l := range order {
		if !pending[l.post] {
			continue // its outcome is shown: keep it
		}
		msg := fmt.Sprintf("~~Approval %d~~: dead. gatewayd restarted; if the call still waits, brokerd posts it again. `bxctl approvals` shows what waits.", l.id)
		if err := mm.PatchMessage(ctx, l.post, msg); err != nil {
			log.Warn("marking an old approval post dead failed", "post", l.post, "err", err.Error())
		}
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

// add records a post made for approval id, before anyone can answer it.
func (d *deadLog) add(id int64, post string) error {
	_, err := d.w.Append(deadRecord{ID: id, Posts: []string{post}})
	return err
}

// finished records posts whose outcome is shown.
func (d *deadLog) finished(id int64, posts []string) error {
	if len(posts) == 0 {
		return nil
	}
	_, err := d.w.Append(deadRecord{ID: id, Posts: posts, Finished: true})
	return err
}
