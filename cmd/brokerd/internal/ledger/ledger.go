// Package ledger is brokerd's record of truth: the audit log and the
// session state files (broker/sessions/<id>.json), behind one lock.
//
// # Invariants
//
//   - One mutex, the ledger lock, is held across reading a session's
//     state, deciding, appending the audit record and writing the state
//     file. Two results for one session are therefore applied one after
//     the other, and a session's taint and untrusted flag only rise:
//     a result joins its class into the taint ([dataclass.Join]) and ORs
//     its untrusted flag in; nothing lowers either. Likewise the recalled
//     flag: a result of a recall or ask_memory call sets it (whatever
//     the result says: failed and empty recalls too), nothing clears it.
//   - The audit record is on disk (fsynced) before the state file
//     changes. A state file never holds a state the log does not.
//   - After a failed audit write, or a failed state write, every call
//     returns an error wrapping [audit.ErrUnavailable]; brokerd denies
//     with audit_unavailable until restarted.
//   - A state file is written atomically (temporary file, fsync, rename,
//     directory fsync), mode 0600, in one canonical form. A missing file
//     is a fresh session ([Fresh]: private, trusted); any other file that
//     does not read back as a valid state is secret and untrusted, and the
//     caller is told ([UnreadableError]) so it can deny state_unreadable.
//     The ledger never overwrites an unreadable file: that is the owner's
//     evidence, and [Rebuild] is the repair.
//   - Every state file equals the fold of the audit log's records for its
//     session (see [Rebuild]). A start after anything but a clean
//     [Ledger.Close] rebuilds the files from the log, so a crash between
//     an audit append and its state write cannot leave a taint too low.
//   - One process at a time writes the state directory: the ledger holds
//     an exclusive flock on its .lock file for its lifetime, and a
//     rebuild takes the same lock.
//
// Only package broker calls a Ledger: its broker.sock, admin.sock and
// gate.sock handlers and its courier (allowances revoked in the chat).
// The decide functions they pass run under the ledger lock and must be
// pure and quick (policy.Decide and policy.Redecide are).
package ledger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// auditLog is the part of *audit.Writer the ledger uses; tests put a
// failing one in its place.
type auditLog interface {
	Append(audit.Record) (int64, error)
	Head() (int64, string)
	Close() error
}

// openCall is a decision still expecting a record: an ask awaiting its
// answer, or an allowed call awaiting its result.
type openCall struct {
	session  string
	ask      bool
	recalls  bool // a recall or ask_memory call: its result is recalled memory
	approved bool // an ask the owner approved and that re-decided allowed
}

// Ledger is brokerd's audit log and session state under one lock.
type Ledger struct {
	mu sync.Mutex // the ledger lock: guards every field below; held across each append and state write

	dir    string // the state directory, broker/sessions
	log    auditLog
	flock  *os.File
	open   map[int64]openCall        // by decision seq
	allow  map[int64]audit.Allowance // the live session allowances, by id (allowance.go)
	broken error                     // the first failed write, wrapping audit.ErrUnavailable
	closed bool
}

// Options configures [Open].
type Options struct {
	Audit audit.Options // passed to audit.Open
}

// Open takes the state directory's lock, opens the audit log in auditDir
// ([audit.Open], which verifies it) and, unless the last ledger closed
// cleanly at the log's current head, rebuilds every state file from the
// log. stateDir is created (0700) if missing.
func Open(stateDir, auditDir string, opts Options) (*Ledger, error) {
	if err := prepareDir(stateDir); err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	fl, err := lockDir(stateDir)
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	w, err := audit.Open(auditDir, opts.Audit)
	if err != nil {
		fl.Close()
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	l := &Ledger{dir: stateDir, log: w, flock: fl, open: map[int64]openCall{}}
	if err := l.start(auditDir); err != nil {
		w.Close()
		fl.Close()
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	if l.allow, err = liveAllowances(auditDir); err != nil {
		w.Close()
		fl.Close()
		return nil, fmt.Errorf("open ledger: read the session allowances: %w", err)
	}
	return l, nil
}

// start consumes the clean mark and rebuilds the state files unless it
// names the log's head.
func (l *Ledger) start(auditDir string) error {
	path := filepath.Join(l.dir, cleanFile)
	mark, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read clean mark: %v", err)
	}
	if err == nil {
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("remove clean mark: %v", err)
		}
		if err := syncDir(l.dir); err != nil {
			return fmt.Errorf("remove clean mark: %v", err)
		}
	}
	if err == nil && string(mark) == headMark(l.log) {
		return nil
	}
	_, err = rebuild(auditDir, l.dir)
	return err
}

func headMark(log auditLog) string {
	seq, hash := log.Head()
	return strconv.FormatInt(seq, 10) + " " + hash + "\n"
}

// DecideFunc decides one call given the session's state. unreadable is
// non-nil when the state file could not be read (s is then secret and
// untrusted): the caller should deny with state_unreadable. It runs
// under the ledger lock.
type DecideFunc func(s policy.Session, unreadable error) audit.DecisionRecord

// Decide reads session id's state, calls fn with it and appends the
// record fn returns; it returns the record's seq (an ask's approval id).
// The ledger sets the record's Session, Taint and Untrusted to the id and
// the state fn was given. A fresh session's state file is created.
//
// An invalid record is refused with nothing written; a failed write
// returns an error wrapping [audit.ErrUnavailable], as every later call
// then does.
func (l *Ledger) Decide(id string, fn DecideFunc) (int64, error) {
	if err := wire.CheckSessionID(id); err != nil {
		return 0, fmt.Errorf("decide: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return 0, err
	}
	return l.decideLocked(id, fn, nil)
}

// decideLocked is Decide under the ledger lock; before, if not nil, runs
// after fn and before the record is appended, and an error from it
// appends nothing.
func (l *Ledger) decideLocked(id string, fn DecideFunc, before func(*audit.DecisionRecord) error) (int64, error) {
	cur, st, unread := readState(l.dir, id)
	rec := fn(cur, unread)
	rec.Session, rec.Taint, rec.Untrusted = id, cur.Taint, cur.Untrusted
	if before != nil {
		if err := before(&rec); err != nil {
			return 0, err
		}
	}
	seq, err := l.append(&audit.Decision{Record: rec})
	if err != nil {
		return 0, err
	}
	recalls := Recalls(rec.Tool)
	switch rec.Outcome {
	case audit.Allowed:
		l.open[seq] = openCall{session: id, recalls: recalls}
	case audit.Ask:
		l.open[seq] = openCall{session: id, ask: true, recalls: recalls}
	}
	return seq, l.store(id, st, cur, cur)
}

// AnswerFunc re-decides an approved call against the session's state now
// (or returns the refusal or expiry). It runs under the ledger lock.
type AnswerFunc func(s policy.Session, unreadable error) audit.Approval

// Answer records the answer to ask decision seq, made through this
// ledger and not yet answered. The ledger sets the record's Decision,
// Taint and Untrusted. If the re-decision is allowed, the call then
// awaits its [Ledger.Result].
func (l *Ledger) Answer(decision int64, fn AnswerFunc) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return 0, err
	}
	oc, ok := l.open[decision]
	if !ok || !oc.ask {
		return 0, fmt.Errorf("answer %d: not an ask decision of this ledger awaiting an answer", decision)
	}
	cur, st, unread := readState(l.dir, oc.session)
	rec := fn(cur, unread)
	rec.Decision, rec.Taint, rec.Untrusted = decision, cur.Taint, cur.Untrusted
	seq, err := l.append(&rec)
	if err != nil {
		return 0, err
	}
	delete(l.open, decision)
	if rec.Outcome == audit.Allowed {
		l.open[decision] = openCall{session: oc.session, recalls: oc.recalls, approved: rec.Answer == audit.AnswerApproved}
	}
	return seq, l.store(oc.session, st, cur, cur)
}

// Result records what the allowed call r.Decision produced and raises its
// session's state: the taint joins r.Class, the session becomes
// untrusted if r is, and it holds recalled memory if the call was a
// recall or ask_memory ([Recalls]). The decision must have been allowed (or approved)
// through this ledger and have no result yet.
func (l *Ledger) Result(r audit.Result) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return 0, err
	}
	oc, ok := l.open[r.Decision]
	if !ok || oc.ask {
		return 0, fmt.Errorf("result for %d: not an allowed call of this ledger awaiting its result", r.Decision)
	}
	cur, st, _ := readState(l.dir, oc.session)
	seq, err := l.append(&r)
	if err != nil {
		return 0, err
	}
	delete(l.open, r.Decision)
	return seq, l.store(oc.session, st, cur, raise(cur, r.Class, r.Untrusted, oc.recalls))
}

// Session reads session id's state, for a query. An unreadable state is
// secret and untrusted, returned with an [*UnreadableError].
func (l *Ledger) Session(id string) (policy.Session, error) {
	if err := wire.CheckSessionID(id); err != nil {
		return worst, fmt.Errorf("session state: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usable(); err != nil {
		return worst, err
	}
	s, _, err := readState(l.dir, id)
	return s, err
}

// Close closes the audit log, writes the clean mark if every state file
// is up to date, and releases the lock. Later calls fail.
func (l *Ledger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	mark := headMark(l.log)
	err := l.log.Close()
	if l.broken == nil && err == nil {
		err = writeClean(l.dir, mark)
	}
	if cerr := l.flock.Close(); err == nil {
		err = cerr
	}
	return err
}

func writeClean(dir, mark string) error {
	path := filepath.Join(dir, cleanFile)
	if err := os.WriteFile(path, []byte(mark), 0o600); err != nil {
		return fmt.Errorf("close ledger: write clean mark: %v", err)
	}
	f, err := os.Open(path)
	if err == nil {
		err = f.Sync()
		f.Close()
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("close ledger: write clean mark: %v", err)
	}
	return nil
}

func (l *Ledger) usable() error {
	switch {
	case l.broken != nil:
		return l.broken
	case l.closed:
		return errors.New("ledger: closed")
	}
	return nil
}

// append writes one record; a failed write makes the ledger unavailable.
func (l *Ledger) append(r audit.Record) (int64, error) {
	seq, err := l.log.Append(r)
	if err != nil && errors.Is(err, audit.ErrUnavailable) {
		l.broken = err
	}
	return seq, err
}

// store writes next as the session's state unless the file is unreadable
// (left for the owner) or already holds it. A failed write makes the
// ledger unavailable: the file may now be behind the log, and only a
// restart (which rebuilds, the clean mark being absent) can be trusted.
func (l *Ledger) store(id string, st status, cur, next policy.Session) error {
	if st == unreadable || (st == present && cur == next) {
		return nil
	}
	if err := writeState(l.dir, id, next); err != nil {
		l.broken = fmt.Errorf("ledger: %v; session state may be behind the audit log until brokerd restarts: %w", err, audit.ErrUnavailable)
		return l.broken
	}
	return nil
}

// raise is s after seeing data of class c, untrusted or not, recalled
// memory or not. It never lowers: the taint is the join, the flags ORs.
func raise(s policy.Session, c dataclass.Class, untrusted, recalled bool) policy.Session {
	return policy.Session{Taint: dataclass.Taint(s.Taint, c), Untrusted: s.Untrusted || untrusted, Recalled: s.Recalled || recalled}
}

// Recalls reports whether a call of tool hands the session recalled
// memory: recall and ask_memory do. The memory tool's results are status
// lines about the model's own write, and the identity files it edits are
// in every session already.
func Recalls(tool string) bool { return tool == toolset.Recall || tool == toolset.AskMemory }
