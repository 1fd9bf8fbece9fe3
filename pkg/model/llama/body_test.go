package llama

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"

	"wntrmute.dev/boxmaker/pkg/model/chat"
)

// randText returns a short string drawn from characters that stress the
// encoder: HTML characters (not escaped), quotes and backslashes, control
// characters, U+2028 (escaped), multi-byte letters and invalid UTF-8
// (replaced by U+FFFD).
func randText(rng *rand.Rand) string {
	parts := []string{"a", "word ", "<", ">", "&", `"`, `\`, "\n", "\t", "\x01", "\u2028", "é", "漢", "\xff", "\xed\xa0\x80", "{}", "\u00a0"}
	var b []byte
	for range rng.IntN(12) {
		b = append(b, parts[rng.IntN(len(parts))]...)
	}
	return string(b)
}

func randMessage(rng *rand.Rand) chat.Message {
	switch rng.IntN(4) {
	case 0:
		return chat.Message{Role: chat.RoleUser, Content: randText(rng)}
	case 1:
		m := chat.Message{Role: chat.RoleAssistant, Content: randText(rng), ReasoningContent: randText(rng)}
		for i := range rng.IntN(3) {
			m.ToolCalls = append(m.ToolCalls, chat.ToolCall{ID: fmt.Sprintf("c%d", i), Type: "function",
				Function: chat.FunctionCall{Name: randText(rng), Arguments: randText(rng)}})
		}
		return m
	case 2:
		return chat.Message{Role: chat.RoleTool, ToolCallID: randText(rng), Name: randText(rng), Content: randText(rng)}
	}
	return chat.Message{Role: randText(rng), Content: randText(rng)}
}

// edit changes one field of m in place (a tool call in the caller's own
// slice included), always to a different value.
func edit(rng *rand.Rand, m *chat.Message) {
	x := randText(rng) + "!"
	switch rng.IntN(6) {
	case 0:
		m.Content += x
	case 1:
		m.ReasoningContent += x
	case 2:
		m.Role += x
	case 3:
		m.ToolCallID += x
	case 4:
		m.Name += x
	default:
		if len(m.ToolCalls) == 0 {
			m.ToolCalls = []chat.ToolCall{{ID: x}}
			return
		}
		tc := &m.ToolCalls[rng.IntN(len(m.ToolCalls))]
		switch rng.IntN(4) {
		case 0:
			tc.ID += x
		case 1:
			tc.Type += x
		case 2:
			tc.Function.Name += x
		default:
			tc.Function.Arguments += x
		}
	}
}

type sentBody struct {
	body requestBody
	want []byte
}

// TestBodyMatchesFullEncoding is the cache's property: over random
// conversations that grow, repeat, shrink, diverge, and have earlier
// messages edited (in place, in the caller's own slices, or in a copy),
// and over changes of the parts outside the messages, every body the
// client sends is byte-identical to a full encoding of the same request,
// read whole or through its reader; and no body already handed out
// changes afterwards.
func TestBodyMatchesFullEncoding(t *testing.T) {
	conversations := 300
	if testing.Short() {
		conversations = 50
	}
	tools := []chat.Tool{chat.NewTool("read_file", "Read <a> file & more.", json.RawMessage(`{"type": "object"}`))}
	hits := 0
	for seed := range conversations {
		rng := rand.New(rand.NewPCG(uint64(seed), 13))
		c, err := New(Config{BaseURL: "http://127.0.0.1:1", Model: "m\u2028<x>", IDSlot: rng.IntN(3)})
		if err != nil {
			t.Fatal(err)
		}
		var sent []sentBody
		msgs := []chat.Message{{Role: chat.RoleSystem, Content: randText(rng)}}
		for step := range 40 {
			req := Request{Messages: msgs, Tools: tools}
			switch op := rng.IntN(12); {
			case op < 5: // the next turn: one to four new messages
				for range 1 + rng.IntN(4) {
					msgs = append(msgs, randMessage(rng))
				}
				req.Messages = msgs
			case op == 5: // the same request again (a retry)
			case op == 6: // an edit of an earlier message, in place
				edit(rng, &msgs[rng.IntN(len(msgs))])
			case op == 7: // an edit in a copy: the caller's old slice is untouched
				msgs = slices.Clone(msgs)
				i := rng.IntN(len(msgs))
				msgs[i].ToolCalls = slices.Clone(msgs[i].ToolCalls)
				edit(rng, &msgs[i])
				req.Messages = msgs
			case op == 8: // a shorter conversation (another session, a compaction)
				msgs = slices.Clone(msgs[:1+rng.IntN(len(msgs))])
				req.Messages = msgs
			case op == 9: // a message dropped from the middle
				if len(msgs) > 2 {
					i := 1 + rng.IntN(len(msgs)-1)
					msgs = slices.Delete(slices.Clone(msgs), i, i+1)
					req.Messages = msgs
				}
			case op == 10: // the parts outside the messages change
				req.ToolChoice = []string{"", "auto", "none", "required"}[rng.IntN(4)]
				req.MaxTokens = rng.IntN(3) * 100
				if rng.IntN(2) == 0 {
					req.Sampling = &Sampling{Temperature: rng.Float64(), TopP: 0.5, TopK: rng.IntN(50)}
				}
				if rng.IntN(2) == 0 {
					req.Tools = nil
				}
			default: // a new slice with equal contents but fresh strings
				fresh := make([]chat.Message, len(msgs))
				for i, m := range msgs {
					m.Content = string([]byte(m.Content))
					m.ToolCalls = slices.Clone(m.ToolCalls)
					fresh[i] = m
				}
				msgs = fresh
				req.Messages = msgs
			}
			cached := len(c.cache.msgs) > 0 && c.cache.extends(req.Messages)
			body, err := c.chatBody(req)
			if err != nil {
				t.Fatal(err)
			}
			want, err := c.fullBody(req)
			if err != nil {
				t.Fatal(err)
			}
			if got := body.bytes(); !bytes.Equal(got, want) {
				t.Fatalf("seed %d step %d: body differs from the full encoding:\n got %s\nwant %s", seed, step, got, want)
			}
			if body.n != int64(len(want)) {
				t.Fatalf("seed %d step %d: body length %d, want %d", seed, step, body.n, len(want))
			}
			if cached {
				hits++
			}
			sent = append(sent, sentBody{body, want})
		}
		for i, s := range sent {
			got, err := io.ReadAll(s.body.reader())
			if err != nil || !bytes.Equal(got, s.want) {
				t.Fatalf("seed %d: body %d changed after later requests (err %v):\n got %s\nwant %s", seed, i, err, got, s.want)
			}
		}
	}
	if hits < conversations*10 {
		t.Fatalf("only %d of %d requests extended the cache: the property was hardly exercised", hits, conversations*40)
	}
}

// TestBodyConcurrent sends diverging conversations through one client from
// several goroutines while earlier bodies are read: under -race, a write
// to bytes a body refers to is a reported race, and every body must still
// equal its full encoding.
func TestBodyConcurrent(t *testing.T) {
	c, err := New(Config{BaseURL: "http://127.0.0.1:1", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			msgs := []chat.Message{{Role: chat.RoleSystem, Content: "s"}}
			for range 100 {
				msgs = append(msgs, randMessage(rng))
				req := Request{Messages: msgs}
				body, err := c.chatBody(req)
				if err != nil {
					t.Error(err)
					return
				}
				want, _ := c.fullBody(req)
				got, _ := io.ReadAll(body.reader())
				if !bytes.Equal(got, want) {
					t.Errorf("goroutine %d: body differs from the full encoding", g)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestSameMessageFields is a tripwire: changing any one field of a
// message, at any depth, must make sameMessage report a difference. A
// field added to chat.Message, chat.ToolCall, chat.FunctionCall or chat.Image that
// sameMessage does not compare fails here.
func TestSameMessageFields(t *testing.T) {
	base := chat.Message{ToolCalls: []chat.ToolCall{{}}, Images: []chat.Image{{}}}
	var paths [][]int
	var walk func(t reflect.Type, path []int)
	walk = func(typ reflect.Type, path []int) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			p := append(slices.Clone(path), i)
			switch f.Type.Kind() {
			case reflect.String:
				paths = append(paths, p)
			case reflect.Struct:
				walk(f.Type, p)
			case reflect.Slice:
				paths = append(paths, append(p, -1)) // the slice's length
				walk(f.Type.Elem(), append(p, 0))
			default:
				t.Fatalf("chat message field %s has kind %s: teach sameMessage and this test about it", f.Name, f.Type.Kind())
			}
		}
	}
	walk(reflect.TypeFor[chat.Message](), nil)
	for _, p := range paths {
		m := base
		m.ToolCalls = slices.Clone(base.ToolCalls)
		m.Images = slices.Clone(base.Images)
		v := reflect.ValueOf(&m).Elem()
		for j, i := range p {
			if i == -1 {
				v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
				break
			}
			if v.Kind() == reflect.Slice {
				v = v.Index(i)
			} else {
				v = v.Field(i)
			}
			if j == len(p)-1 {
				v.SetString("changed")
			}
		}
		if sameMessage(&base, &m) {
			t.Errorf("sameMessage ignores field path %v: %+v", p, m)
		}
	}
	if len(paths) < 10 {
		t.Fatalf("walked only %d fields", len(paths))
	}
}
