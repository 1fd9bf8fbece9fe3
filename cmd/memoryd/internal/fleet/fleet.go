package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"wntrmute.dev/boxmaker/cmd/memoryd/internal/honcho"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd/honchoconf"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// IdentitySession is the Honcho session that holds entries consolidate
// moved out of identity. It starts with '_', which no Boxmaker session
// id may ([wire.CheckSessionID]), so no session's turns can land in it.
const IdentitySession = "_identity"

// Config is what fleet memory runs with.
type Config struct {
	Honcho   honchoconf.Settings
	Gate     Gate
	Sessions string // loopd's sessions/, read only
	// Backoff bounds the wait between failed sends (doubling from Min).
	BackoffMin, BackoffMax time.Duration
	// Place is where a session's turns are filed: the agent's pair, or
	// for a project's session (memoryd's [[project]]) the project's own
	// pair, never the agent's, which every thread's recall searches; ok
	// false keeps the turns on the host (a project with no pair). nil:
	// every session's go to the agent's pair.
	Place func(session string) (p Pair, ok bool)
}

// Pair is a trusted and an untrusted workspace: clean turns go to the
// first, every other written turn to the second (P23).
type Pair struct{ Trusted, Untrusted honchoconf.ID }

// Defaults.
const (
	DefaultBackoffMin = time.Second
	DefaultBackoffMax = 5 * time.Minute
)

// Client is the part of *honcho.Client fleet memory uses.
type Client interface {
	Workspace(ctx context.Context, id honchoconf.ID) (honcho.Workspace, error)
	AddMessages(ctx context.Context, w, s honchoconf.ID, msgs []honcho.NewMessage) ([]honcho.Message, error)
	ListMessages(ctx context.Context, w, s honchoconf.ID, page, size int, reverse bool) (honcho.Page, error)
	Search(ctx context.Context, scope honcho.Search, query string, limit int) ([]honcho.Message, error)
	Chat(ctx context.Context, w, p honchoconf.ID, q honcho.Question) (honcho.Answer, error)
	DeleteSession(ctx context.Context, w, s honchoconf.ID) error
}

// Fleet is fleet memory.
type Fleet struct {
	cfg    Config
	log    *slog.Logger
	client Client
	outbox *Outbox
	now    func() time.Time
	wake   chan struct{}

	mu      sync.Mutex // guards ensured and pending
	ensured map[honchoconf.ID]bool
	pending map[pendingTurns]bool

	fileMu sync.Mutex // orders filing: one turn's decision at a time
	// sendMu: a batch is sent whole before a forget moves its session's
	// messages, so none is marked sent into a session being deleted.
	sendMu sync.Mutex
}

// Open opens the outbox at path.
func Open(log *slog.Logger, cfg Config, client Client, path string) (*Fleet, error) {
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = DefaultBackoffMin
	}
	if cfg.BackoffMax < cfg.BackoffMin {
		cfg.BackoffMax = max(DefaultBackoffMax, cfg.BackoffMin)
	}
	o, err := OpenOutbox(path)
	if err != nil {
		return nil, err
	}
	return &Fleet{cfg: cfg, log: log, client: client, outbox: o, now: time.Now, wake: make(chan struct{}, 1), ensured: map[honchoconf.ID]bool{},
		pending: map[pendingTurns]bool{}}, nil
}

// Close closes the outbox.
func (f *Fleet) Close() error { return f.outbox.Close() }

func (f *Fleet) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func turnKey(session string, epoch, turn int64) string {
	return fmt.Sprintf("turn/%s/%d/%d", session, epoch, turn)
}

// MessageID is a message's id: its session, epoch and log record, so a
// message is the same message however often it is filed or sent.
func MessageID(session string, epoch int64, record int) string {
	return fmt.Sprintf("%s-e%d-r%d", session, epoch, record)
}

// TurnEnded files every ended turn of session's epoch log not filed yet,
// asking brokerd once for the session's state. It returns how many turns
// it filed in each place. When brokerd does not answer within the
// gate's wait, nothing is filed: the turns are marked late (an answer
// that comes later files them untrusted, never trusted), the session is
// retried by [Fleet.Retry], and the error wraps [ErrDeferred].
func (f *Fleet) TurnEnded(ctx context.Context, session string, epoch int64) (map[Filing]int, error) {
	turns, err := ReadTurns(layout.EpochLog(filepath.Join(f.cfg.Sessions, session), epoch))
	if err != nil {
		return nil, err
	}
	counts, err := f.fileTurns(ctx, session, turns, true)
	if errors.Is(err, ErrDeferred) {
		f.mu.Lock()
		f.pending[pendingTurns{session, epoch}] = true
		f.mu.Unlock()
	}
	return counts, err
}

// ErrDeferred is a filing put off: brokerd's gate did not answer, and
// no turn goes to any workspace by loopd's labels alone.
var ErrDeferred = errors.New("fleet: filing deferred until brokerd's gate answers")

// ErrNoGate is a filing not made: memoryd has no gate.sock to ask, so
// no answer of brokerd's can ever come. The turns stay in the session
// logs; the catch-up of a start with a gate files them.
var ErrNoGate = errors.New("fleet: no turn is written to Honcho without brokerd's gate (memoryd has no gate.sock to ask); see docs/runbook.md#fleet-gate-unanswered")

// pendingTurns is a session's epoch log whose live filing was deferred.
type pendingTurns struct {
	session string
	epoch   int64
}

// fileTurns files turns of one session by brokerd's answer. Without one
// it files nothing (ErrDeferred); with mark (the live path, where the
// answer was due now) it first marks the turns late, so whenever they
// are filed they are untrusted. A catch-up does not mark: a turn found
// at start, when brokerd may not be listening yet, waits for an answer
// that is its first.
func (f *Fleet) fileTurns(ctx context.Context, session string, turns []Turn, mark bool) (map[Filing]int, error) {
	pair := Pair{f.cfg.Honcho.Trusted, f.cfg.Honcho.Untrusted}
	if f.cfg.Place != nil {
		p, ok := f.cfg.Place(session)
		if !ok {
			return map[Filing]int{}, nil
		}
		pair = p
	}
	f.fileMu.Lock()
	defer f.fileMu.Unlock()
	var todo []Turn
	for _, t := range turns {
		done, err := f.outbox.Filed(turnKey(t.Session, t.Epoch, t.Turn))
		if err != nil {
			return nil, err
		}
		if !done {
			todo = append(todo, t)
		}
	}
	counts := map[Filing]int{}
	if len(todo) == 0 {
		return counts, nil
	}
	if f.cfg.Gate.Socket == "" {
		return counts, ErrNoGate
	}
	gate, gateErr := f.cfg.Gate.Ask(ctx, session)
	if gateErr != nil {
		if mark {
			keys := make([]string, len(todo))
			for i, t := range todo {
				keys[i] = turnKey(t.Session, t.Epoch, t.Turn)
			}
			if err := f.outbox.MarkLate(keys, gateErr.Error(), f.now()); err != nil {
				return counts, err
			}
		}
		return counts, fmt.Errorf("%w: %w", ErrDeferred, gateErr)
	}
	for _, t := range todo {
		key := turnKey(t.Session, t.Epoch, t.Turn)
		late, err := f.outbox.Late(key)
		if err != nil {
			return counts, err
		}
		filing, why := File(gate, late, t.Labels, f.cfg.Honcho.MaxClass)
		if err := f.outbox.File(key, filing, why, f.items(t, filing, pair), f.now()); err != nil {
			return counts, err
		}
		counts[filing]++
		f.log.Info("turn filed for fleet memory", "session", t.Session, "epoch", t.Epoch, "turn", t.Turn, "filing", string(filing), "why", why)
	}
	f.poke()
	return counts, nil
}

// Retry files again the session logs whose live filing was deferred and
// returns how many still wait for brokerd.
func (f *Fleet) Retry(ctx context.Context) (int, error) {
	f.mu.Lock()
	var todo []pendingTurns
	for p := range f.pending {
		todo = append(todo, p)
	}
	f.mu.Unlock()
	waiting := 0
	for _, p := range todo {
		turns, err := ReadTurns(layout.EpochLog(filepath.Join(f.cfg.Sessions, p.session), p.epoch))
		if err == nil {
			_, err = f.fileTurns(ctx, p.session, turns, false)
		}
		switch {
		case errors.Is(err, ErrDeferred):
			waiting++
			continue
		case err != nil:
			// Left for the next start's catch-up, which reads every log.
			f.log.Warn("fleet memory: a deferred session log was not filed; the next start files it; see docs/runbook.md#fleet-outbox-stuck", "session", p.session, "err", err.Error())
		}
		f.mu.Lock()
		delete(f.pending, p)
		f.mu.Unlock()
	}
	return waiting, nil
}

// Pending is how many session logs wait for brokerd's gate.
func (f *Fleet) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pending)
}

// items are a turn's messages for Honcho, in pair: none if withheld.
func (f *Fleet) items(t Turn, filing Filing, pair Pair) []Item {
	if filing == Withheld {
		return nil
	}
	s := f.cfg.Honcho
	ws, source := pair.Trusted, "memory"
	if filing == Untrusted {
		ws, source = pair.Untrusted, "memory-tainted"
	}
	class := dataclass.Join(t.Labels.Taint, dataclass.Floor)
	one := func(l Line, peer honchoconf.ID) Item {
		return Item{ID: MessageID(t.Session, t.Epoch, l.Record), Workspace: ws.String(), Session: t.Session, Peer: peer.String(),
			Content: content(l.Text), Metadata: map[string]string{
				"boxmaker_id": MessageID(t.Session, t.Epoch, l.Record), "class": class.String(), "source": source,
				"turn": fmt.Sprintf("%d/%d", t.Epoch, t.Turn)}}
	}
	var out []Item
	for _, l := range t.Said {
		out = append(out, one(l, s.Speaker))
	}
	if t.Reply != nil {
		out = append(out, one(*t.Reply, s.Peer))
	}
	return out
}

// content is text as Honcho will store it unchanged: valid UTF-8, no NUL
// (Honcho strips it), at most [honcho.MaxContent] characters (the rest
// cut with a mark), so no message can block the outbox.
func content(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	if utf8.RuneCountInString(s) <= honcho.MaxContent {
		return s
	}
	r := []rune(s)
	return string(r[:honcho.MaxContent-1]) + "…"
}

// Moved is an entry consolidate moved out of identity, for the trusted
// workspace.
type Moved struct {
	Note      string // the note's id
	Text      string
	Class     dataclass.Class
	Untrusted bool
}

// Notes files moved entries not filed yet: identity is edited only by
// clean sessions, so they go to the trusted workspace from the agent's
// peer, unless one is marked untrusted or above the class.
func (f *Fleet) Notes(moved []Moved) error {
	f.fileMu.Lock()
	defer f.fileMu.Unlock()
	s := f.cfg.Honcho
	for _, m := range moved {
		key := "note/" + m.Note
		filing, why := File(State{Taint: m.Class, Untrusted: m.Untrusted}, false, State{Taint: m.Class, Untrusted: m.Untrusted}, s.MaxClass)
		var items []Item
		if filing != Withheld {
			ws, source := s.Trusted, "identity"
			if filing == Untrusted {
				ws, source = s.Untrusted, "memory-tainted"
			}
			items = []Item{{ID: "note-" + m.Note, Workspace: ws.String(), Session: IdentitySession, Peer: s.Peer.String(), Content: content(m.Text),
				Metadata: map[string]string{"boxmaker_id": "note-" + m.Note, "class": dataclass.Join(m.Class, dataclass.Floor).String(), "source": source}}}
		}
		if err := f.outbox.File(key, filing, why, items, f.now()); err != nil {
			return err
		}
	}
	f.poke()
	return nil
}

// CatchUp files every ended turn of every session log not filed yet
// (turns that ended while memoryd was down): brokerd's answer now is at
// least as restrictive as it was then, since taint only rises; a turn
// an earlier live query marked late is filed untrusted. A session
// brokerd does not answer for (it may start after memoryd) is left for
// the next catch-up; CatchUp returns how many were. A catch-up that
// filed every log, deferring none, ends a rebuilt outbox's looking up
// ([Outbox.Rebuilt]): whatever Honcho held from before is then filed.
func (f *Fleet) CatchUp(ctx context.Context, logs []string) (deferred int, err error) {
	complete := true
	for _, p := range logs {
		turns, err := ReadTurns(p)
		if err != nil {
			complete = false
			f.log.Warn("session log not read for fleet memory; see docs/runbook.md#memoryd-unavailable", "file", p, "err", err.Error())
			continue
		}
		if len(turns) == 0 {
			continue
		}
		_, err = f.fileTurns(ctx, turns[0].Session, turns, false)
		switch {
		case errors.Is(err, ErrDeferred):
			deferred++
			complete = false
		case errors.Is(err, ErrNoGate):
			complete = false
		case err != nil:
			return deferred, err
		}
	}
	if complete {
		return 0, f.outbox.CaughtUp()
	}
	return deferred, nil
}

// Resync makes Honcho hold what the outbox says it should: every
// message is sent again unless Honcho already holds it.
func (f *Fleet) Resync() (int, error) {
	n, err := f.outbox.Resync()
	f.poke()
	return n, err
}

// Status is the outbox's state.
func (f *Fleet) Status() (Status, error) { return f.outbox.Status() }
