package llama

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
)

// Reply scripts what the model generates for one request, and how the
// stream behaves while it does.
type Reply struct {
	// Reasoning is the thinking text. Like Content it is trimmed, because
	// the template trims both when the reply is replayed; a model that
	// emitted surrounding spaces would lose its prefix on the next turn.
	Reasoning string
	// ThinkTokens appends that many one-token "." pieces to Reasoning: a
	// long per-token reasoning stream for tests of a thinking cap.
	ThinkTokens int
	Content     string
	ToolCalls   []ToolCall

	// BatchDelay is a real wait per prompt batch (slow prompt processing);
	// pings are sent during it.
	BatchDelay time.Duration
	// TokenDelay is a real wait before each generated token after the
	// first (slow generation); pings are sent during it.
	TokenDelay time.Duration
	// StallAfter and ErrorAfter count every generated token, including
	// the 4 tokens that close the thinking block ("\n</think>\n\n").
	//
	// Stall, if positive, is a silence of that length, without bytes and
	// without pings, after StallAfter generated tokens: a hung connection,
	// for client liveness tests.
	StallAfter int
	Stall      time.Duration
	// Hold, if set, is a wait after StallAfter generated tokens until it
	// is closed, with pings as during a slow token (TokenDelay): a
	// generation that a test releases when it is ready, for tests that act
	// while a stream is in flight (checks/vm's mid-turn kills). The bytes
	// are those of a slow model; only their timing is the test's.
	Hold <-chan struct{}
	// Error, if set, is sent as a mid-stream error event after ErrorAfter
	// generated tokens; the stream then closes without [DONE].
	ErrorAfter int
	Error      *Error
}

// ToolCall is one scripted tool call. Arguments is a JSON object in text,
// as in OpenAI's wire; the fake streams it compacted, as llama-server
// serialises the arguments it parsed (common/chat.cpp:266-330).
type ToolCall struct {
	Name      string
	Arguments string
}

// defaultReply answers a request when no reply is scripted.
var defaultReply = Reply{
	Reasoning: "Nothing was scripted, so the fake gives its default reply.",
	Content:   "This is the fake llama-server's default reply.",
}

// Script queues replies. Replies are consumed in order, one per chat
// request, server-wide, at the moment a request gets its slot and fits its
// context; a request that finds the queue empty gets a deterministic
// default reply. Tests that run concurrent requests and care which gets
// which must order them.
func (s *Server) Script(replies ...Reply) {
	s.t.Helper()
	for i := range replies {
		for _, tc := range replies[i].ToolCalls {
			if _, err := orderedObject([]byte(tc.Arguments)); err != nil || !json.Valid([]byte(tc.Arguments)) {
				s.t.Fatalf("Script: tool call %q: arguments %q are not a JSON object", tc.Name, tc.Arguments)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, replies...)
}

// Respond sets a chooser consulted for every chat request before the
// script: given the request's body, it returns the reply to generate and
// true, or false to take the script's next reply. It lets a test that
// runs other clients' requests in between (a restarted loopd's self-test)
// answer its own requests by what they hold, without a place in the queue.
func (s *Server) Respond(pick func(body []byte) (Reply, bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chooser = pick
}

func (s *Server) nextReply(body []byte) Reply {
	s.mu.Lock()
	pick := s.chooser
	s.mu.Unlock()
	if pick != nil {
		if r, ok := pick(body); ok {
			return r
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.script) == 0 {
		return defaultReply
	}
	r := s.script[0]
	s.script = s.script[1:]
	return r
}

// Piece kinds of a generated token: what the parser makes of it.
type kind int

const (
	kindReasoning kind = iota
	kindMarkup         // template text the parser strips: </think>, newlines
	kindContent
	kindTool
	kindEOS
)

// genToken is one generated token. For kindTool, call is the tool call's
// index and pos/of place the token within that call's XML.
type genToken struct {
	piece   string
	kind    kind
	call    int
	pos, of int
}

// plannedCall is a tool call as the fake streams it.
type plannedCall struct {
	id   string
	name string
	args string // compact JSON text, streamed in fragments
}

// plan is the reply the model will generate, in tokens: the reasoning, the
// markup that closes the thinking block (replaced by forcedEnd when
// reasoning is cut short), and the rest: content, tool calls, <|im_end|>.
type plan struct {
	reasoning []genToken
	close     []genToken
	rest      []genToken
	calls     []plannedCall
}

// makePlan tokenises the reply into exactly the pieces the template renders
// for the assistant message the client will get back: assistantBody and
// <|im_end|>. Each segment ends or starts with a byte that cannot extend a
// token across the boundary, so tokenising the segments one by one gives
// the same pieces as tokenising the rendered message.
func makePlan(r Reply, thinking bool, newID func() string) plan {
	var p plan
	reasoning := strings.TrimSpace(r.Reasoning) + strings.Repeat(".", r.ThinkTokens)
	content := strings.TrimSpace(r.Content)
	if thinking {
		p.reasoning = pieces(reasoning, kindReasoning)
		p.close = pieces(thinkClose, kindMarkup)
	}
	p.rest = pieces(content, kindContent)
	for i, tc := range r.ToolCalls {
		var c bytes.Buffer
		json.Compact(&c, []byte(tc.Arguments)) // checked by Script
		args, _ := orderedObject(c.Bytes())
		p.calls = append(p.calls, plannedCall{id: newID(), name: tc.Name, args: c.String()})
		xml := tokenize(callXML(i, content, renderCall{name: tc.Name, args: args}), true)
		for j, piece := range xml {
			p.rest = append(p.rest, genToken{piece: piece, kind: kindTool, call: i, pos: j, of: len(xml)})
		}
	}
	p.rest = append(p.rest, genToken{piece: eosPiece, kind: kindEOS})
	return p
}

func pieces(text string, k kind) []genToken {
	var out []genToken
	for _, p := range tokenize(text, true) {
		out = append(out, genToken{piece: p, kind: k})
	}
	return out
}

// forcedEnd is what the reasoning budget forces when reasoning is ended
// early: reasoning_budget_message, then </think> (reference §3,
// common/reasoning-budget.cpp:291-310). The model then goes on with the
// blank line it puts before its answer. The reply no longer matches what
// the template renders (no newline before </think>), so replaying it costs
// a re-read of that turn, as measured on the deployed model (decision P4).
func forcedEnd(message string) []genToken {
	out := pieces(message, kindReasoning)
	out = append(out, genToken{piece: "</think>", kind: kindMarkup})
	return append(out, pieces("\n\n", kindMarkup)...)
}
