package session

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/logs/jsonl"
	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/model/chat"
	"wntrmute.dev/boxmaker/pkg/model/llama"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// Session is one open epoch of a session log (epoch.go): the current
// one, the highest complete epoch on disk. Its methods are safe for
// concurrent use.
type Session struct {
	ID       string
	Epoch    int64
	Baseline sessionlog.Baseline

	state string

	mu      sync.Mutex // guards w, records, last, replay, slot and full
	w       *jsonl.Writer
	records []sessionlog.Record
	last    []byte // the file's last line, without its newline (a next Head names its hash)
	// replay and slot follow records as they are appended, so a model
	// call costs the new records, not the whole log.
	replay sessionlog.Replayer
	slot   llama.SlotState
	full   bool
}

// Dir is sessions/<id> under the state directory.
func Dir(state, id string) string { return layout.SessionDir(state, id) }

// Open opens (or creates) session id under state, at its current epoch.
// A new session snapshots newBaseline as epoch 0's; an existing one keeps
// the baseline its epoch started with. A torn or undecodable log, or an
// epoch whose head does not follow the epoch before it, is refused.
func Open(state, id string, newBaseline func() (sessionlog.Baseline, error)) (*Session, error) {
	if err := wire.CheckSessionID(id); err != nil {
		return nil, fmt.Errorf("open session: %w", err)
	}
	dir := Dir(state, id)
	// 0750 and 0640 under sessions/, whose setgid group is memoryd's
	// (package layout): memoryd reads session logs to reindex them.
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("open session: %w", err)
	}
	epoch, err := Current(dir)
	if err != nil {
		return nil, err
	}
	mk := newBaseline
	if epoch > 0 {
		// A later epoch's baseline was written before its log: missing,
		// the directory was tampered with.
		mk = func() (sessionlog.Baseline, error) {
			return sessionlog.Baseline{}, fmt.Errorf("%s has no baseline; see docs/runbook.md#session-log-damaged", logPath(dir, epoch))
		}
	}
	base, err := loadBaseline(baselinePath(dir, epoch), mk)
	if err != nil {
		return nil, err
	}
	lpath := logPath(dir, epoch)
	recs, last, err := readRecords(lpath)
	if err != nil {
		return nil, err
	}
	if epoch > 0 {
		if err := checkHead(dir, epoch, recs); err != nil {
			return nil, err
		}
	}
	w, err := jsonl.OpenMode(lpath, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open session %s: %w", id, err)
	}
	s := &Session{ID: id, Epoch: epoch, Baseline: base, state: state, w: w, last: last}
	for _, r := range recs {
		s.add(r)
	}
	return s, nil
}

// loadBaseline reads the snapshot, or writes a new one atomically (temp
// file, fsync, rename) so that a crash never leaves half a baseline.
func loadBaseline(path string, mk func() (sessionlog.Baseline, error)) (sessionlog.Baseline, error) {
	var b sessionlog.Baseline
	data, err := os.ReadFile(path)
	if err == nil {
		if err := strict.Unmarshal(data, &b); err != nil {
			return sessionlog.Baseline{}, fmt.Errorf("%s: %v; see docs/runbook.md#session-log-damaged", path, err)
		}
		return b, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return sessionlog.Baseline{}, fmt.Errorf("read baseline: %w", err)
	}
	if b, err = mk(); err != nil {
		return sessionlog.Baseline{}, fmt.Errorf("build baseline: %w", err)
	}
	if err := writeBaseline(path, b); err != nil {
		return sessionlog.Baseline{}, err
	}
	return b, nil
}

func writeBaseline(path string, b sessionlog.Baseline) error {
	data, err := strict.Marshal(b)
	if err != nil {
		return fmt.Errorf("encode baseline: %w", err)
	}
	if err := writeFile(path, data); err != nil {
		return fmt.Errorf("write baseline: %w", err)
	}
	return nil
}

// writeFile writes path atomically: a temp file beside it, fsync,
// rename, fsync of the directory. A crash leaves the old file (or none)
// or the new one, never part of it.
func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// readRecords decodes every line strictly and returns the records and
// the last line; a missing file is an empty log.
func readRecords(path string) ([]sessionlog.Record, []byte, error) {
	var recs []sessionlog.Record
	var last []byte
	err := jsonl.Scan(path, jsonl.DefaultMaxLine, func(n int, b []byte) error {
		r, err := sessionlog.Records.Decode(b)
		if err != nil {
			return fmt.Errorf("%s:%d: %v; see docs/runbook.md#session-log-damaged", path, n, err)
		}
		recs = append(recs, r)
		last = append(last[:0], b...)
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	return recs, last, err
}

// Append logs r durably and only then adds it to the session's records.
func (s *Session) Append(r sessionlog.Record) error {
	line, err := sessionlog.Records.Encode(r)
	if err != nil {
		return fmt.Errorf("session %s: %w", s.ID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.w.AppendEncoded(line); err != nil {
		return fmt.Errorf("session %s: %w", s.ID, err)
	}
	s.last = line
	s.add(r)
	return nil
}

// add adds a logged record to the in-memory state. s.mu is held, or s is
// not yet shared.
func (s *Session) add(r sessionlog.Record) {
	s.records = append(s.records, r)
	s.replay.Add(r)
	switch r := r.(type) {
	case *sessionlog.Usage:
		s.slot = slotOf(r)
	case *sessionlog.Stopped:
		s.full = s.full || r.Reason == wire.StopSessionFull
	}
}

func slotOf(u *sessionlog.Usage) llama.SlotState {
	return llama.SlotState{Total: u.CacheN + u.PromptN + u.PredictedN}
}

// Messages is [sessionlog.Replay](s.Baseline, s.Records(), upTo), the request's
// messages for turn upTo, kept up to date as records are appended
// (pkg/logs/sessionlog.Replayer) instead of rebuilt from the whole log. The
// messages it returns must not be modified; later calls never change
// them.
func (s *Session) Messages(upTo int64) []chat.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replay.Messages(s.Baseline.System, upTo)
}

// Slot is StateOf(s.Records()).Slot: the server's context after the
// last completion, from the last usage record.
func (s *Session) Slot() llama.SlotState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.slot
}

// Full is StateOf(s.Records()).Full: a turn of this epoch ended with a
// session_full stop.
func (s *Session) Full() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.full
}

// Records returns a copy of the records in log order.
func (s *Session) Records() []sessionlog.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sessionlog.Record(nil), s.records...)
}

// Close closes the log.
func (s *Session) Close() error { return s.w.Close() }

// State is what loopd needs to know about a session to continue it.
// Turns are numbered from 1.
type State struct {
	// Interrupted is a turn that started (it has a record beyond its
	// user messages: a reply, a result) and has no TurnEnd: loopd stopped
	// during it. 0 if none. A turn loopd stopped during its first model
	// call left only its messages, so it reads as Waiting
	// (turn.Unanswered closes it when its outcome is asked for).
	Interrupted int64
	// Pending lists the Interrupted turn's tool calls that have no result.
	Pending []chat.ToolCall
	// Waiting is a turn with user messages that has not started (they
	// arrived while another turn ran, or loopd stopped first). 0 if none.
	Waiting int64
	// NextTurn is the turn a new message joins: Waiting if set, else a new
	// turn after every turn in the log.
	NextTurn int64
	// Slot is the server's context after the last completion: its Total
	// (cache_n + prompt_n + predicted_n of the last usage record) is how
	// many tokens the next request starts from.
	Slot llama.SlotState
	// Full: a turn of this epoch ended with a session_full stop. The
	// epoch only grows, so no later request in it can fit either.
	Full bool
}

// StateOf reads the state from the records.
func StateOf(recs []sessionlog.Record) State {
	var st State
	var last, started, maxUser int64
	ended := map[int64]bool{}
	answered := map[string]bool{}
	calls := map[int64][]chat.ToolCall{}
	for _, r := range recs {
		t := r.TurnOf()
		last = max(last, t)
		switch r := r.(type) {
		case *sessionlog.User:
			maxUser = max(maxUser, t)
			continue
		case *sessionlog.Head, *sessionlog.Summary:
			continue // the previous epoch's last turn, ended there
		case *sessionlog.Assistant:
			calls[t] = append(calls[t], r.Message.ToolCalls...)
		case *sessionlog.ToolResult:
			answered[r.CallID] = true
		case *sessionlog.Usage:
			st.Slot = slotOf(r)
		case *sessionlog.TurnEnd:
			ended[t] = true
		case *sessionlog.Stopped:
			st.Full = st.Full || r.Reason == wire.StopSessionFull
		}
		started = max(started, t)
	}
	if started > 0 && !ended[started] {
		st.Interrupted = started
		for _, c := range calls[started] {
			if !answered[c.ID] {
				st.Pending = append(st.Pending, c)
			}
		}
	}
	if maxUser > started {
		st.Waiting = maxUser
	}
	st.NextTurn = last + 1
	if st.Waiting != 0 {
		st.NextTurn = st.Waiting
	}
	return st
}
