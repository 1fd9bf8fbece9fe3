package session

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strconv"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/logs/jsonl"
	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
)

// # Epochs on disk
//
// Epoch n is n.baseline.json and n.jsonl under sessions/<id>. An epoch
// change writes n+1.baseline.json, then n+1.jsonl, each atomically
// (temp file, fsync, rename, fsync of the directory); the rename of the
// log is the commit. The current epoch is the highest n whose n.jsonl
// exists: a crash before the commit leaves epoch n current (a stray
// n+1.baseline.json or temp file is ignored and overwritten by the next
// change); after it, epoch n+1 is complete. Epoch n's files are never
// opened for writing again.

var logRE = regexp.MustCompile(`^(0|[1-9][0-9]{0,8})\.jsonl$`)

func logPath(dir string, epoch int64) string { return layout.EpochLog(dir, epoch) }

func baselinePath(dir string, epoch int64) string { return layout.EpochBaseline(dir, epoch) }

// Current is the current epoch of the session in dir: the highest n with
// a regular file n.jsonl, 0 if there is none.
func Current(dir string) (int64, error) {
	files, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("open session: %w", err)
	}
	var cur int64
	for _, f := range files {
		m := logRE.FindStringSubmatch(f.Name())
		if m == nil || !f.Type().IsRegular() {
			continue
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		cur = max(cur, n)
	}
	return cur, nil
}

// checkHead refuses an epoch whose first record is not its head, or
// whose head does not name the last line of the epoch before it (that
// file was changed after the epoch ended, or the files were mixed).
func checkHead(dir string, epoch int64, recs []sessionlog.Record) error {
	path := logPath(dir, epoch)
	var head *sessionlog.Head
	if len(recs) > 0 {
		head, _ = recs[0].(*sessionlog.Head)
	}
	if head == nil || head.Epoch != epoch || head.Prev != epoch-1 {
		return fmt.Errorf("%s does not start with its epoch's head record; see docs/runbook.md#session-log-damaged", path)
	}
	_, last, err := readRecords(logPath(dir, epoch-1))
	if err != nil {
		return err
	}
	if sessionlog.LineHash(last) != head.PrevHash {
		return fmt.Errorf("%s: the previous epoch's last line does not have the hash its head names (epoch %d was changed after it ended); see docs/runbook.md#session-log-damaged", path, epoch-1)
	}
	return nil
}

// Trust is the session's taint and untrusted flag: the head's (carried
// from every earlier epoch) raised by this epoch's tool results. It
// never goes down, across epochs or within one.
func (s *Session) Trust() sessionlog.Trust {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sessionlog.TrustOf(s.records)
}

// Untrusted reports whether the session has read untrusted content, in
// this epoch or any before it.
func (s *Session) Untrusted() bool { return s.Trust().Untrusted }

// Ended reports whether any turn has ended in this epoch: an epoch with
// none has nothing to summarise (a session changes epoch at most once
// per idle period, so it can never loop).
func (s *Session) Ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.records {
		if _, ok := r.(*sessionlog.TurnEnd); ok {
			return true
		}
	}
	return false
}

// Step names a point of [Session.Change], for tests that stop there as a
// crash would (testOnlyStep).
type Step string

// The steps of an epoch change, in order.
const (
	StepBaseline Step = "baseline" // before the new baseline is written
	StepLog      Step = "log"      // the baseline is in place; before the new log is written
	StepCommit   Step = "commit"   // the new log is in place (committed); before loopd uses it
)

// Change ends this epoch and returns the session opened at the next one,
// whose log holds its head (the trust of every epoch so far, and the hash
// of this epoch's last line), the summary sum (its text and figures; its
// turn and epoch are set here: upTo, as the head's), and
// the user messages waiting for a turn after upTo, unchanged. The caller
// holds whatever keeps other appends out (loopd's live session lock) and
// uses only the returned session afterwards; this one is closed on
// success. On an error this epoch stays current and open.
func (s *Session) Change(base sessionlog.Baseline, sum sessionlog.Summary, upTo int64) (*Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dir, next := Dir(s.state, s.ID), s.Epoch+1
	t := sessionlog.TrustOf(s.records)
	recs := []sessionlog.Record{
		&sessionlog.Head{Turn: upTo, Epoch: next, Prev: s.Epoch, PrevHash: sessionlog.LineHash(s.last), Taint: t.Taint, Untrusted: t.Untrusted},
		&sessionlog.Summary{Turn: upTo, Epoch: next, Text: sum.Text, CacheN: sum.CacheN, PromptN: sum.PromptN, PredictedN: sum.PredictedN},
	}
	for _, r := range s.records {
		if u, ok := r.(*sessionlog.User); ok && u.Turn > upTo {
			recs = append(recs, &sessionlog.User{Turn: u.Turn, Text: u.Text, Files: u.Files})
		}
	}
	var buf bytes.Buffer
	for _, r := range recs {
		line, err := sessionlog.Records.Encode(r)
		if err != nil {
			return nil, fmt.Errorf("change epoch: %w", err)
		}
		buf.Write(line)
		buf.WriteByte('\n')
	}
	if err := step(StepBaseline); err != nil {
		return nil, err
	}
	if err := writeBaseline(baselinePath(dir, next), base); err != nil {
		return nil, fmt.Errorf("change epoch: %w", err)
	}
	if err := step(StepLog); err != nil {
		return nil, err
	}
	if err := writeFile(logPath(dir, next), buf.Bytes()); err != nil {
		return nil, fmt.Errorf("change epoch: write log: %w", err)
	}
	if err := step(StepCommit); err != nil {
		return nil, err
	}
	w, err := jsonl.OpenMode(logPath(dir, next), 0o640)
	if err != nil {
		// Committed but not opened: the next Open finds the new epoch.
		return nil, fmt.Errorf("change epoch: %w", err)
	}
	ns := &Session{ID: s.ID, Epoch: next, Baseline: base, state: s.state, w: w}
	for _, r := range recs {
		ns.add(r)
	}
	ns.last = bytes.TrimSuffix(buf.Bytes()[bytes.LastIndexByte(buf.Bytes()[:buf.Len()-1], '\n')+1:], []byte("\n"))
	s.w.Close()
	return ns, nil
}

// EpochRecords reads epoch n of session id under state (an earlier one,
// for answers that finished in it), strictly, never for writing.
func EpochRecords(state, id string, n int64) ([]sessionlog.Record, error) {
	recs, _, err := readRecords(logPath(Dir(state, id), n))
	return recs, err
}
