package turn

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/socket/wire"

	"wntrmute.dev/boxmaker/cmd/loopd/internal/session"
	"wntrmute.dev/boxmaker/pkg/model/chat"
	"wntrmute.dev/boxmaker/pkg/model/llama"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

var conversations = flag.Int("conversations", 10000, "random conversations in TestAppendOnlyProperty")

// script is an in-process model that answers at random and keeps every
// request it was sent, serialised message by message.
type script struct {
	rng      *rand.Rand
	requests [][][]byte      // per request, each message's encoding
	epochs   []int64         // per request, the session's epoch
	replies  []*chat.Message // per request; nil when the call failed
	fail     bool            // the next call fails, as when loopd is killed mid-turn
	tick     int
	// check, if set, vets each request before it is answered.
	check func(llama.Request, llama.SlotState) error
}

func (m *script) Complete(_ context.Context, req llama.Request, prev llama.SlotState) (*llama.Completion, error) {
	if m.check != nil {
		if err := m.check(req, prev); err != nil {
			return nil, err
		}
	}
	var enc [][]byte
	for _, msg := range req.Messages {
		b, err := strict.Marshal(msg)
		if err != nil {
			return nil, err
		}
		enc = append(enc, b)
	}
	m.requests = append(m.requests, enc)
	if m.fail {
		m.fail = false
		m.replies = append(m.replies, nil)
		return nil, errors.New("killed")
	}
	m.tick++
	msg := chat.Message{Role: chat.RoleAssistant, ReasoningContent: fmt.Sprintf("thought %d <b>&", m.tick)}
	switch m.rng.IntN(4) {
	case 0, 1:
		msg.Content = fmt.Sprintf("answer %d \u2028 \"quoted\"", m.tick)
	default:
		for i := range 1 + m.rng.IntN(2) {
			name, args := "clock", `{}`
			switch m.rng.IntN(4) {
			case 1:
				name, args = "find_tool", fmt.Sprintf(`{"query":"q%d"}`, m.rng.IntN(3))
			case 2:
				name, args = "call_tool", fmt.Sprintf(`{"name":"read_file","arguments":{"path":"/f%d"}}`, m.rng.IntN(3))
			case 3:
				name, args = "call_tool", fmt.Sprintf(`{"name":"consult","arguments":{"question":"q%d"}}`, m.rng.IntN(3))
			}
			msg.ToolCalls = append(msg.ToolCalls, chat.ToolCall{ID: fmt.Sprintf("c%d-%d", m.tick, i), Type: "function", Function: chat.FunctionCall{Name: name, Arguments: args}})
		}
	}
	m.replies = append(m.replies, &msg)
	c := &llama.Completion{Message: msg, Timings: &llama.Timings{CacheN: prev.Total, PromptN: 5, PredictedN: 7}}
	c.Slot = llama.SlotState{Total: prev.Total + 12}
	if m.rng.IntN(10) == 0 {
		c.CacheLoss = &llama.CacheLoss{Tokens: prev.Total, PrevTotal: prev.Total}
	}
	return c, nil
}

// randomBroker answers at random and sometimes queues a user message for
// the next turn while the call runs, as a second chat message would.
type randomBroker struct {
	rng      *rand.Rand
	queue    func()
	consults int // consults answered, so the property test can show it covered them
}

func (b *randomBroker) Call(_ context.Context, r wire.ToolRequest, pending func(int64)) wire.ToolResult {
	if b.rng.IntN(4) == 0 {
		b.queue()
	}
	if r.Tool == "consult" {
		// A consult is pending for a while (brokerd's consult_pending);
		// the owner often writes meanwhile, and the answer, or the clear
		// result of an expired one, arrives as the call's result.
		if b.rng.IntN(2) == 0 {
			b.queue()
		}
		b.consults++
		switch b.rng.IntN(3) {
		case 0:
			return wire.ToolResult{Status: wire.StatusFailed, Output: "consult failed: the answer did not end within the total bound; see docs/runbook.md#consult-unbounded", Label: dataclass.Label{Class: dataclass.Private, Untrusted: true}}
		case 1:
			return wire.ToolResult{Status: wire.StatusDenied, Output: "consult denied (consult_untrusted)", Label: dataclass.Label{Class: dataclass.Public}}
		}
		return wire.ToolResult{Status: wire.StatusRan, Output: "[consult: the answer]\nremote " + string(r.Arguments), Label: dataclass.Label{Class: dataclass.Private, Untrusted: true}}
	}
	switch b.rng.IntN(4) {
	case 0:
		return wire.ToolResult{Status: wire.StatusDenied, Output: "no grant", Label: dataclass.Label{Class: dataclass.Public}}
	case 1:
		pending(int64(b.rng.IntN(100)))
		return wire.ToolResult{Status: wire.StatusRan, Output: "contents of " + string(r.Arguments), Label: dataclass.Label{Class: dataclass.Private, Untrusted: true}}
	case 2:
		return wire.ToolResult{Status: wire.StatusFailed, Output: "exit 1", Label: dataclass.Label{Class: dataclass.Private}}
	}
	return wire.ToolResult{Status: wire.StatusRan, Output: strings.Repeat("x", b.rng.IntN(64)), Label: dataclass.Label{Class: dataclass.Public}}
}

// TestAppendOnlyProperty runs random conversations (users, batched users,
// tool calls, denials, approvals, consults with owner messages queued
// while they are pending, failures, cache loss, runaway stops, loopd
// killed mid-turn and restarted from the files, epoch changes with loopd
// killed at every step of them: epoch_property_test.go) and checks every
// request against the one before it in the same epoch:
//   - its messages and slot state are Replay and StateOf of the whole log
//     (the session keeps them incrementally);
//   - its messages start with the previous request's messages, byte for
//     byte, followed by the previous reply exactly as the model sent it;
//   - the system message and tools never change;
//   - the clock's time, the one volatile value, appears only in messages
//     added after the clock was called.
func TestAppendOnlyProperty(t *testing.T) {
	n := *conversations
	if testing.Short() {
		n = 500
	}
	state := stateDir(t)
	consults := 0
	for i := range n {
		c, err := conversation(state, i)
		if err != nil {
			t.Fatalf("conversation %d: %v", i, err)
		}
		consults += c
	}
	if consults == 0 {
		t.Error("no conversation made a consult: the property did not cover it")
	}
}

func conversation(state string, seed int) (int, error) {
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	id := fmt.Sprintf("p%d", seed)
	s, err := session.Open(state, id, baseline)
	if err != nil {
		return 0, err
	}
	defer func() { s.Close() }()
	m := &script{rng: rng}
	var turnNo int64 = 1
	var mismatch error
	// The engine's messages and slot are the session's incremental ones:
	// they must equal Replay and StateOf of the whole log, every call.
	ep := &epochs{rng: rng, state: state, id: id, files: map[string][]byte{}}
	m.check = func(req llama.Request, prev llama.SlotState) error {
		m.epochs = append(m.epochs, s.Epoch)
		if err := ep.first(s, req, turnNo); err != nil {
			mismatch = err
			return err
		}
		want := sessionlog.Replay(s.Baseline, s.Records(), turnNo)
		if !reflect.DeepEqual(req.Messages, want) {
			mismatch = fmt.Errorf("turn %d: the session's messages differ from Replay:\n%+v\n%+v", turnNo, req.Messages, want)
		} else if st := session.StateOf(s.Records()); prev != st.Slot {
			mismatch = fmt.Errorf("turn %d: the session's slot %+v differs from StateOf's %+v", turnNo, prev, st.Slot)
		} else if s.Full() != st.Full {
			mismatch = fmt.Errorf("turn %d: the session's full %v differs from StateOf's %v", turnNo, s.Full(), st.Full)
		}
		return mismatch
	}
	clockAt := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := &randomBroker{rng: rng}
	b.queue = func() { s.Append(&sessionlog.User{Turn: turnNo + 1, Text: "queued"}) }
	e := &Engine{Model: m, Broker: b, Limits: Limits{MaxCalls: 1 + rng.IntN(4), RepeatLimit: 2 + rng.IntN(2)},
		Now: func() time.Time { clockAt = clockAt.Add(time.Minute); return clockAt }}
	for range 1 + rng.IntN(6) {
		if err := Interrupted(s); err != nil {
			return 0, err
		}
		if rng.IntN(3) == 0 {
			ns, err := ep.change(s)
			if err != nil {
				return 0, err
			}
			s = ns
		}
		turnNo = session.StateOf(s.Records()).NextTurn
		for range 1 + rng.IntN(2) {
			if err := s.Append(&sessionlog.User{Turn: turnNo, Text: fmt.Sprintf("user %d", rng.IntN(1000))}); err != nil {
				return 0, err
			}
		}
		if rng.IntN(8) == 0 {
			m.fail = true
		}
		if err := e.Run(context.Background(), s, turnNo, func(strict.Variant) {}); err != nil {
			if mismatch != nil {
				return 0, mismatch
			}
			// Killed: restart from the files, as a new loopd would.
			s.Close()
			if s, err = session.Open(state, id, baseline); err != nil {
				return 0, err
			}
		}
	}
	if err := ep.unchanged(); err != nil {
		return 0, err
	}
	return b.consults, checkRequests(m)
}

func checkRequests(m *script) error {
	for i := 1; i < len(m.requests); i++ {
		prev, cur := m.requests[i-1], m.requests[i]
		if m.epochs[i] != m.epochs[i-1] {
			continue // a new epoch's first request: checked by epochs.first
		}
		if !bytes.Equal(prev[0], cur[0]) {
			return fmt.Errorf("request %d changed the system message", i)
		}
		if len(cur) <= len(prev) {
			return fmt.Errorf("request %d has %d messages, request %d had %d: not an extension", i, len(cur), i-1, len(prev))
		}
		for j := range prev {
			if !bytes.Equal(prev[j], cur[j]) {
				return fmt.Errorf("request %d message %d differs from request %d's:\n%s\n%s", i, j, i-1, cur[j], prev[j])
			}
		}
		if r := m.replies[i-1]; r != nil {
			want, _ := strict.Marshal(*r)
			if !bytes.Equal(cur[len(prev)], want) {
				return fmt.Errorf("request %d does not replay reply %d exactly:\n%s\n%s", i, i-1, cur[len(prev)], want)
			}
		}
		for j := range prev {
			if strings.Contains(string(cur[j]), "2026-01-01") && !strings.Contains(string(prev[j]), "2026-01-01") {
				return fmt.Errorf("request %d: a time appeared in old message %d", i, j)
			}
		}
	}
	return nil
}
