// Package pending is brokerd's table of tool calls parked for the owner's
// approval, keyed by approval id (the audit seq of the ask decision).
//
// # Invariants
//
//   - Whoever removes an entry answers it, and only the remover: approve
//     ([Table.ApproveBy]), refuse ([Table.RefuseBy]), expiry (a timer set when
//     the entry is added) or the caller withdrawing it
//     ([Table.Withdraw], when its connection closes). Removal happens
//     under the table's lock, so each entry gets exactly one [Answer],
//     never two and never none.
//   - Every entry expires: the table's ttl is positive and at most
//     [MaxTTL] (a day), refused otherwise, so no call waits for ever.
//   - Every entry has a code drawn from crypto/rand when it is added
//     ([wire.ApprovalCodeLen] symbols of [wire.ApprovalCodeAlphabet]);
//     an owner's answer ([Table.ApproveBy], [Table.RefuseBy]) that does
//     not repeat it is refused and answers nothing: the entry stays
//     pending. The code leaves brokerd only towards the owner (admin.sock
//     and gateway.sock), never towards loopd.
//   - The table hands out copies: an [Entry]'s arguments cannot be
//     changed through what [Table.List] or [Table.Get] return.
//
// The table has its own lock, never held while calling out, and taken
// without the ledger's: it records nothing. The caller that receives an
// answer records it (an audit approval record) and acts on it.
package pending

import (
	"cmp"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// MaxTTL is the longest an approval may wait ([approvals] ttl).
const MaxTTL = 24 * time.Hour

// ErrNotPending is returned for an id the table does not hold: never
// added, or already answered.
var ErrNotPending = errors.New("approval is not pending")

// ErrWrongCode is an owner's answer whose code is not the approval's.
var ErrWrongCode = errors.New("the code is not this approval's")

// Kind is how an entry was answered.
type Kind uint8

// The answers.
const (
	Approved  Kind = iota + 1 // the owner approved: re-decide, then run
	Refused                   // the owner refused; Answer.Reason may say why
	Expired                   // nobody answered within the ttl
	Withdrawn                 // the caller went away (its connection closed)
)

func (k Kind) String() string {
	switch k {
	case Approved:
		return "approved"
	case Refused:
		return "refused"
	case Expired:
		return "expired"
	case Withdrawn:
		return "withdrawn"
	}
	return fmt.Sprintf("invalid answer %d", uint8(k))
}

// Answer is the one answer an entry gets.
type Answer struct {
	Kind     Kind
	Reason   string // Refused only: the owner's words, one line, possibly empty
	Approver string // Approved or Refused: who answered, if known (for the audit record)
	// Scope is how far an approval reaches: this call only, or a session
	// allowance (brokerd makes it after the re-decision allows the call).
	Scope wire.AnswerScope
}

// Entry is one parked call.
type Entry struct {
	ID        int64           // the approval id: the ask decision's audit seq
	Session   string          // the session that made the call
	Tool      string          // the target tool, never call_tool
	Arguments json.RawMessage // its parsed arguments, serialised again
	Expires   time.Time       // set by [Table.Add]
	Code      string          // drawn by [Table.Add]; see the package's invariants
	// SessionScope is what a session allowance made from this approval
	// would cover, in words, or "" if none can be.
	SessionScope string
}

func (e Entry) clone() Entry {
	e.Arguments = slices.Clone(e.Arguments)
	return e
}

// Options configures a [Table]; the zero value uses the real clock.
type Options struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// AfterFunc runs f after d and returns a function that stops it, as
	// time.AfterFunc does; nil means time.AfterFunc. Tests fire it by
	// hand; it must not call f before returning.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
}

// Table holds the pending approvals. It is safe for concurrent use.
type Table struct {
	ttl       time.Duration
	now       func() time.Time
	afterFunc func(time.Duration, func()) func() bool

	mu      sync.Mutex        // guards entries; never held while calling out
	entries map[int64]*parked // by id
}

type parked struct {
	Entry
	answer chan Answer // buffered 1: the remover's send never blocks
	stop   func() bool // stops the expiry timer
}

// New returns an empty table whose entries expire ttl after they are
// added. A ttl that is not positive or is over [MaxTTL] is refused.
func New(ttl time.Duration, opts Options) (*Table, error) {
	if ttl <= 0 || ttl > MaxTTL {
		return nil, fmt.Errorf("pending approvals: ttl %v must be positive and at most %v", ttl, MaxTTL)
	}
	t := &Table{ttl: ttl, now: opts.Now, entries: map[int64]*parked{}}
	if t.now == nil {
		t.now = time.Now
	}
	t.afterFunc = opts.AfterFunc
	if t.afterFunc == nil {
		t.afterFunc = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	return t, nil
}

// Add parks e, setting its expiry to now plus the ttl, and returns the
// channel on which its one answer arrives. An id already pending, an id
// below 1, or arguments that are not JSON are refused.
func (t *Table) Add(e Entry) (Entry, <-chan Answer, error) {
	if e.ID < 1 {
		return Entry{}, nil, fmt.Errorf("add approval %d: an approval id is a seq, 1 or more", e.ID)
	}
	if !json.Valid(e.Arguments) {
		return Entry{}, nil, fmt.Errorf("add approval %d: arguments are not JSON", e.ID)
	}
	p := &parked{Entry: e.clone(), answer: make(chan Answer, 1)}
	p.Expires = t.now().Add(t.ttl)
	p.Code = newCode()
	t.mu.Lock()
	if _, dup := t.entries[e.ID]; dup {
		t.mu.Unlock()
		return Entry{}, nil, fmt.Errorf("add approval %d: already pending", e.ID)
	}
	t.entries[e.ID] = p
	// Set under the lock, so that no remover can see p without its stop.
	p.stop = t.afterFunc(t.ttl, func() { t.answer(e.ID, nil, Answer{Kind: Expired}) })
	t.mu.Unlock()
	return p.clone(), p.answer, nil
}

// newCode draws an approval's code: 30 bits from crypto/rand, spelled in
// [wire.ApprovalCodeAlphabet] (32 symbols, 5 bits each).
func newCode() string {
	var b [4]byte
	rand.Read(b[:]) // never fails (crypto/rand's contract since Go 1.24)
	v := binary.BigEndian.Uint32(b[:])
	out := make([]byte, wire.ApprovalCodeLen)
	for i := range out {
		out[i] = wire.ApprovalCodeAlphabet[v&31]
		v >>= 5
	}
	return string(out)
}

// answer removes entry id and sends a its answer. Only the caller that
// removed the entry sends, so each entry is answered exactly once. A
// non-nil code must be the entry's (as [wire.ParseApprovalCode] reads
// it), or the entry stays pending; nil is for the answers that need none
// (expiry and withdrawal): every answer of the owner's carries the code.
func (t *Table) answer(id int64, code *string, a Answer, check ...func(Entry) error) (Entry, error) {
	t.mu.Lock()
	p, ok := t.entries[id]
	if ok && code != nil {
		c, err := wire.ParseApprovalCode(*code)
		if err != nil || subtle.ConstantTimeCompare([]byte(c), []byte(p.Code)) != 1 {
			t.mu.Unlock()
			return Entry{}, fmt.Errorf("approval %d: %w", id, ErrWrongCode)
		}
	}
	for _, f := range check {
		if ok {
			if err := f(p.clone()); err != nil {
				t.mu.Unlock()
				return Entry{}, fmt.Errorf("approval %d: %w", id, err)
			}
		}
	}
	if ok {
		delete(t.entries, id)
	}
	t.mu.Unlock()
	if !ok {
		return Entry{}, fmt.Errorf("approval %d: %w", id, ErrNotPending)
	}
	p.stop()
	p.answer <- a
	return p.clone(), nil
}

// ApproveBy answers entry id Approved and returns it: code must be the entry's
// ([ErrWrongCode] otherwise, and the entry stays pending); approver is
// who approved.
func (t *Table) ApproveBy(id int64, code, approver string) (Entry, error) {
	return t.ApproveScoped(id, code, approver, wire.ScopeCall, nil)
}

// ApproveScoped is [Table.ApproveBy] with how far the approval reaches;
// check, if not nil, may refuse the answer after the code is checked,
// and the entry then stays pending.
func (t *Table) ApproveScoped(id int64, code, approver string, scope wire.AnswerScope, check func(Entry) error) (Entry, error) {
	if check == nil {
		return t.answer(id, &code, Answer{Kind: Approved, Approver: approver, Scope: scope})
	}
	return t.answer(id, &code, Answer{Kind: Approved, Approver: approver, Scope: scope}, check)
}

// RefuseBy answers entry id Refused with the owner's reason (one line of
// at most [MaxReason] characters, or empty) and returns it; code as for
// [Table.ApproveBy]. A reason that does not fit is refused and the entry
// stays pending.
func (t *Table) RefuseBy(id int64, code, reason, approver string) (Entry, error) {
	if err := checkReason(reason); err != nil {
		return Entry{}, fmt.Errorf("refuse approval %d: reason %v", id, err)
	}
	return t.answer(id, &code, Answer{Kind: Refused, Reason: reason, Approver: approver})
}

// MaxReason caps a refusal's reason, in characters: it becomes the
// approval record's detail.
const MaxReason = audit.MaxDetail

// Withdraw answers entry id Withdrawn: its caller went away. It reports
// whether the entry was still pending.
func (t *Table) Withdraw(id int64) bool {
	_, err := t.answer(id, nil, Answer{Kind: Withdrawn})
	return err == nil
}

// Get returns a copy of entry id.
func (t *Table) Get(id int64) (Entry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.entries[id]
	if !ok {
		return Entry{}, fmt.Errorf("approval %d: %w", id, ErrNotPending)
	}
	return p.clone(), nil
}

// List returns copies of every pending entry, sorted by id.
func (t *Table) List() []Entry {
	t.mu.Lock()
	out := make([]Entry, 0, len(t.entries))
	for _, p := range t.entries {
		out = append(out, p.clone())
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b Entry) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

func checkReason(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("is not valid UTF-8")
	}
	if n := utf8.RuneCountInString(s); n > MaxReason {
		return fmt.Errorf("is %d characters, over %d", n, MaxReason)
	}
	for _, c := range s {
		if unicode.IsControl(c) || c == '\u2028' || c == '\u2029' {
			return fmt.Errorf("contains the control character %U", c)
		}
	}
	return nil
}
