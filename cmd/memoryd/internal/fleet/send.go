package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"wntrmute.dev/boxmaker/cmd/memoryd/internal/honcho"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd/honchoconf"
)

// lookPages bounds how far back a message whose earlier send may have
// reached Honcho is looked for (newest first): a lost answer is of a
// recent send, and the session's newest messages are ours. A message
// of a rebuilt outbox, or resynced, is looked for over every page. A
// variable only so that a test can lower it.
var lookPages = 20

// Run sends the outbox to Honcho until ctx ends, retrying failures with
// backoff. Nothing Honcho does stops it.
func (f *Fleet) Run(ctx context.Context) {
	delay := time.Duration(0)
	for {
		sent, err := f.SendOnce(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			delay = min(max(2*delay, f.cfg.BackoffMin), f.cfg.BackoffMax)
			f.log.Warn("fleet memory: send failed, will retry; see docs/runbook.md#fleet-outbox-stuck", "err", err.Error(), "retry_in", delay.String())
		case sent > 0:
			delay = 0
			continue
		default:
			delay = 0
		}
		wait := delay
		if wait == 0 {
			// Nothing due now: sleep until the earliest message waiting
			// on its retry time, or until a new filing wakes us.
			wait = f.cfg.BackoffMax
			if at, ok, err := f.outbox.NextDue(); err == nil && ok {
				wait = min(wait, max(time.Until(at), time.Millisecond))
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-f.wake:
			if delay > 0 {
				// A new turn does not cut a backoff short.
				select {
				case <-t.C:
				case <-ctx.Done():
					return
				}
			}
		case <-t.C:
		}
		t.Stop()
	}
}

// SendOnce sends one batch of due messages (all of one Honcho session)
// and returns how many Honcho now holds.
func (f *Fleet) SendOnce(ctx context.Context) (int, error) {
	f.sendMu.Lock()
	defer f.sendMu.Unlock()
	// A forget's session deletion goes before any message (forget.go).
	if err := f.deleteDue(ctx); err != nil {
		return 0, err
	}
	items, err := f.outbox.Due(f.now(), honcho.MaxBatch)
	if err != nil || len(items) == 0 {
		return 0, err
	}
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	err = f.send(ctx, items)
	if err != nil {
		// The whole batch waits: only a confirmed answer marks a message.
		if ferr := f.outbox.Failed(ids, err.Error(), f.now().Add(f.cfg.BackoffMin)); ferr != nil {
			return 0, errors.Join(err, ferr)
		}
		return 0, err
	}
	return len(items), nil
}

func (f *Fleet) send(ctx context.Context, items []Item) error {
	w, err := honchoconf.ParseID(items[0].Workspace)
	if err != nil {
		return err
	}
	s, err := honchoconf.ParseID(items[0].Session)
	if err != nil {
		return err
	}
	if err := f.ensure(ctx, w); err != nil {
		return err
	}
	// A message sent before may be in Honcho already (its answer lost,
	// or memoryd stopped before it recorded the answer).
	var maybe []string
	whole := false
	for _, it := range items {
		if it.Attempts > 0 || it.Lookup {
			maybe = append(maybe, it.ID)
		}
		whole = whole || it.Lookup
	}
	if len(maybe) > 0 {
		held, err := f.held(ctx, w, s, maybe, whole)
		if err != nil {
			return err
		}
		var found []string
		var rest []Item
		for _, it := range items {
			if held[it.ID] {
				found = append(found, it.ID)
			} else {
				rest = append(rest, it)
			}
		}
		if err := f.outbox.Sent(found); err != nil {
			return err
		}
		if len(found) > 0 {
			f.log.Info("fleet memory: messages already in Honcho, not sent again", "count", len(found), "workspace", w.String(), "session", s.String())
		}
		items = rest
	}
	if len(items) == 0 {
		return nil
	}
	msgs := make([]honcho.NewMessage, len(items))
	ids := make([]string, len(items))
	for i, it := range items {
		p, err := honchoconf.ParseID(it.Peer)
		if err != nil {
			return err
		}
		msgs[i] = honcho.NewMessage{Peer: p, Content: it.Content, Metadata: it.Metadata}
		ids[i] = it.ID
	}
	if err := f.outbox.Attempting(ids); err != nil {
		return err
	}
	if testOnlyBeforeSend != nil {
		testOnlyBeforeSend()
	}
	if _, err := f.client.AddMessages(ctx, w, s, msgs); err != nil {
		return err
	}
	return f.outbox.Sent(ids)
}

// testOnlyBeforeSend runs after the attempt is recorded and before the
// request: a test stops memoryd there.
var testOnlyBeforeSend func()

// ensure gets or creates workspace w once per process.
func (f *Fleet) ensure(ctx context.Context, w honchoconf.ID) error {
	f.mu.Lock()
	done := f.ensured[w]
	f.mu.Unlock()
	if done {
		return nil
	}
	if _, err := f.client.Workspace(ctx, w); err != nil {
		return err
	}
	f.mu.Lock()
	f.ensured[w] = true
	f.mu.Unlock()
	return nil
}

// held reports which of ids Honcho's session s holds, by the
// boxmaker_id in each message's metadata, newest first: over the newest
// lookPages pages, or with whole over every page (a message of a
// rebuilt outbox, or resynced, may have been sent long ago).
func (f *Fleet) held(ctx context.Context, w, s honchoconf.ID, ids []string, whole bool) (map[string]bool, error) {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	held := map[string]bool{}
	for page := 1; whole || page <= lookPages; page++ {
		p, err := f.client.ListMessages(ctx, w, s, page, honcho.MaxPageSize, true)
		if errors.Is(err, honcho.ErrNotFound) {
			return held, nil // no session yet: nothing is held
		}
		if err != nil {
			return nil, err
		}
		for _, m := range p.Items {
			if id := BoxmakerID(m.Metadata); want[id] {
				held[id] = true
			}
		}
		if len(held) == len(want) || int64(page) >= p.Pages {
			break
		}
	}
	return held, nil
}

// BoxmakerID is the boxmaker_id in a message's metadata, or "".
func BoxmakerID(md json.RawMessage) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(md, &m) != nil {
		return ""
	}
	var id string
	if json.Unmarshal(m["boxmaker_id"], &id) != nil {
		return ""
	}
	return id
}
