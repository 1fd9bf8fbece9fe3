package memd

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"wntrmute.dev/boxmaker/cmd/memoryd/internal/store"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/text/escape"
	"wntrmute.dev/boxmaker/pkg/text/truncate"
)

// The owner's `!why` and `!forget` from the chat (wire's memchat.go;
// decision row "!why and !forget in the chat"). gatewayd sends them only
// for an approver's post; memoryd answers only for an entry the thread's
// project may recall, makes each forget's one-time code itself, and
// forgets only when the code comes back from the same thread, once,
// before it expires.

// codeTTL is how long a forget's code is good for.
const codeTTL = 10 * time.Minute

// maxCodes bounds the codes waiting at once: a flood of `!forget` asks
// pushes out the oldest, never grows memoryd.
const maxCodes = 64

// maxWrong is how many wrong codes end a waiting forget.
const maxWrong = 3

type waiting struct {
	code    string
	expires time.Time
	wrong   int
}

// codes are the forgets waiting for their code, by id and thread.
type codes struct {
	mu sync.Mutex
	m  map[string]*waiting
}

func codeKey(id, thread string) string { return id + "\x00" + thread }

// issue draws a code for id in thread, replacing any earlier one.
func (c *codes) issue(id, thread string, now time.Time) (string, error) {
	b := make([]byte, wire.ApprovalCodeLen)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	for i := range b {
		b[i] = wire.ApprovalCodeAlphabet[int(b[i])%len(wire.ApprovalCodeAlphabet)]
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*waiting{}
	}
	for k, w := range c.m {
		if now.After(w.expires) {
			delete(c.m, k)
		}
	}
	for len(c.m) >= maxCodes {
		var oldest string
		for k, w := range c.m {
			if oldest == "" || w.expires.Before(c.m[oldest].expires) {
				oldest = k
			}
		}
		delete(c.m, oldest)
	}
	c.m[codeKey(id, thread)] = &waiting{code: string(b), expires: now.Add(codeTTL)}
	return string(b), nil
}

// take reports whether typed is the waiting code of id in thread, and
// if so uses it up; a wrong code counts, and the third ends the wait.
func (c *codes) take(id, thread, typed string, now time.Time) (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := codeKey(id, thread)
	w := c.m[k]
	switch {
	case w == nil:
		return false, "no forget of " + id + " is waiting in this thread (ask with `!forget ID` first)"
	case now.After(w.expires):
		delete(c.m, k)
		return false, "the code expired (codes last " + codeTTL.String() + "); ask again with `!forget ID`"
	}
	code, err := wire.ParseApprovalCode(typed)
	if err != nil || subtle.ConstantTimeCompare([]byte(code), []byte(w.code)) != 1 {
		w.wrong++
		if w.wrong >= maxWrong {
			delete(c.m, k)
			return false, "the code is wrong, for the third time: the forget is dropped; ask again with `!forget ID`"
		}
		return false, "the code is wrong"
	}
	delete(c.m, k)
	return true, ""
}

// chatServer is memchat.sock: gatewayd's relay of the owner's commands.
func (m *Memd) chatServer() *rpc.Server {
	return rpc.NewServer(&wire.Memchat, m.log, rpc.On(m.chatWhy), rpc.On(m.chatForget))
}

// chatRefused is a refusal in the chat: what, why, and where to read on.
func chatRefused(op, msg string) *wire.Error {
	return &wire.Error{Op: op, Kind: wire.Denied, Msg: msg + "; see docs/runbook.md#memory-chat-commands"}
}

func (m *Memd) chatWhy(_ context.Context, _ sockets.Peer, r *wire.ChatWhy) strict.Variant {
	id := strings.TrimSpace(r.ID)
	if !validChannel(r.Channel) || !validChannel(r.Thread) || r.Thread == "" {
		return &wire.Error{Op: "why", Kind: wire.Invalid, Msg: "bad channel or thread"}
	}
	if err := m.inThread(id, r.Thread, r.Channel); err != nil {
		return chatRefused("why", err.Error())
	}
	if err := chatClass(m, id); err != nil {
		return chatRefused("why", err.Error())
	}
	c, err := m.Why(id)
	var rr *store.Refused
	switch {
	case errors.As(err, &rr):
		return &wire.Error{Op: "why", Kind: wire.Invalid, Msg: rr.Msg}
	case err != nil:
		m.log.Error("chat why", "id", id, "err", err.Error())
		return &wire.Error{Op: "why", Kind: wire.Internal, Msg: "memoryd could not read its files for the why-chain; see docs/runbook.md#memoryd-unavailable"}
	}
	m.log.Info("chat why", "id", id, "user", r.User, "channel", r.Channel)
	return c
}

func (m *Memd) chatForget(ctx context.Context, _ sockets.Peer, r *wire.ChatForget) strict.Variant {
	id := strings.TrimSpace(r.ID)
	if !validChannel(r.Channel) || !validChannel(r.Thread) || r.Thread == "" {
		return &wire.Error{Op: "forget", Kind: wire.Invalid, Msg: "bad channel or thread"}
	}
	if err := m.inThread(id, r.Thread, r.Channel); err != nil {
		return chatRefused("forget", err.Error())
	}
	if r.Code == "" {
		what, err := m.chatWhat(id)
		if err != nil {
			return chatRefused("forget", err.Error())
		}
		code, err := m.codes.issue(id, r.Thread, time.Now())
		if err != nil {
			return &wire.Error{Op: "forget", Kind: wire.Internal, Msg: "memoryd could not draw a code; see docs/runbook.md#memoryd-unavailable"}
		}
		m.log.Info("chat forget asked", "id", id, "user", r.User, "thread", r.Thread)
		return &wire.ForgetCode{ID: id, What: what, Code: code, Minutes: int(codeTTL / time.Minute)}
	}
	if ok, why := m.codes.take(id, r.Thread, r.Code, time.Now()); !ok {
		m.log.Warn("chat forget refused", "id", id, "user", r.User, "thread", r.Thread, "why", why)
		return chatRefused("forget", "nothing was forgotten: "+why)
	}
	msg, err := m.Forget(ctx, id, false, fmt.Sprintf("asked in the chat by Mattermost user %s in thread %s", r.User, r.Thread))
	var rr *store.Refused
	switch {
	case errors.As(err, &rr):
		return &wire.Error{Op: "forget", Kind: wire.Denied, Msg: rr.Msg}
	case err != nil:
		m.log.Error("chat forget", "id", id, "err", err.Error())
		return &wire.Error{Op: "forget", Kind: wire.Internal, Msg: "the forget failed: " + err.Error() + "; see docs/runbook.md#memoryd-unavailable"}
	}
	m.log.Info("chat forget", "id", id, "user", r.User, "thread", r.Thread, "msg", msg)
	return &wire.MemoryDone{Msg: msg}
}

// inThread refuses an entry that a thread of channel could not recall:
// another project's note, session record or Honcho workspace (said
// plainly, never with the entry's text). Identity entries are in every
// prompt.
func (m *Memd) inThread(id, thread, channel string) error {
	here, _ := m.cfg.ProjectOfSession(wire.ChatSessionPrefix+thread, channel)
	var session string
	switch {
	case honchoHit.MatchString(id):
		ws := honchoHit.FindStringSubmatch(id)[1]
		for _, p := range m.cfg.Projects {
			if t, u, ok := p.Pair(); ok && p.Name != here.Name && (ws == t.String() || ws == u.String()) {
				return fmt.Errorf("%s is not in this thread's memory", id)
			}
		}
		return nil
	case store.NoteID.MatchString(id):
		n, ok := m.store.Note(id)
		if !ok {
			return fmt.Errorf("there is no note %s", id)
		}
		session = n.Session
	default:
		s, _, _, _, ok := store.ParseRecordKey(id)
		if !ok {
			return nil // not an entry of a session: Why and Forget judge it
		}
		session = s
	}
	if p := m.projectOf(session); p != "" && p != here.Name {
		return fmt.Errorf("%s is not in this thread's memory", id)
	}
	return nil
}

// chatWhat is an entry as the chat's confirmation shows it: a note's
// kind, class and text, or a session record's place. A note above
// private is not shown in the chat at all: the owner forgets it on the
// host.
func (m *Memd) chatWhat(id string) (string, error) {
	if err := chatClass(m, id); err != nil {
		return "", err
	}
	if store.NoteID.MatchString(id) {
		n, _ := m.store.Note(id)
		return fmt.Sprintf("note %s (%s, class %s): %s", n.ID, n.Kind, n.Class, quote(truncate.Ellipsis(n.Text, 300))), nil
	}
	if _, _, _, _, ok := store.ParseRecordKey(id); ok {
		return escape.Line(id) + " (a record of a session log)", nil
	}
	return "", fmt.Errorf("%q is not a note id (n12) or a session record as recall shows it; identity entries are removed with the memory tool or bxctl memory undo", id)
}

// chatClass refuses a note above private: its text (which the chain and
// the confirmation quote) never goes to the chat; the owner asks on the
// host.
func chatClass(m *Memd, id string) error {
	if !store.NoteID.MatchString(id) {
		return nil
	}
	if n, ok := m.store.Note(id); ok && !n.Class.AtMost(dataclass.Private) {
		return fmt.Errorf("%s is of class %s, which never goes to the chat; run bxctl memory why %s or bxctl memory forget %s on the host", id, n.Class, id, id)
	}
	return nil
}
