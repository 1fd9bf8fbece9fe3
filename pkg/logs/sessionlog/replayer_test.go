package sessionlog

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/model/chat"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

func randRecord(rng *rand.Rand, turn int64, n int) Record {
	switch rng.IntN(8) {
	case 0, 1:
		return &User{Turn: turn, Text: fmt.Sprintf("user %d <&>", n)}
	case 2, 3:
		m := chat.Message{Role: chat.RoleAssistant, Content: fmt.Sprintf("answer %d", n), ReasoningContent: "r"}
		for i := range rng.IntN(3) {
			m.ToolCalls = append(m.ToolCalls, chat.ToolCall{ID: fmt.Sprintf("c%d-%d", n, i), Type: "function", Function: chat.FunctionCall{Name: "clock", Arguments: "{}"}})
		}
		return &Assistant{Turn: turn, Message: m}
	case 4, 5:
		return &ToolResult{Turn: turn, CallID: fmt.Sprintf("c%d", n), Tool: "clock", Status: logWords[rng.IntN(len(logWords))].status, Content: fmt.Sprintf("out %d", n)}
	case 6:
		return &Usage{Turn: turn, CacheN: n}
	}
	return &TurnEnd{Turn: turn}
}

type handedOut struct {
	msgs []chat.Message // as returned
	copy []chat.Message // a copy taken when it was returned
}

// TestReplayerMatchesReplay is the Replayer's property: on random logs
// (records queued for the next turn, records appended late for an earlier
// turn as Interrupted does, upTo moving forward, staying, going back, the
// system prompt changing) every Messages equals Replay of all the records,
// and no slice it returned earlier changes later.
func TestReplayerMatchesReplay(t *testing.T) {
	logs := 2000
	if testing.Short() {
		logs = 300
	}
	extended, calls := 0, 0
	for seed := range logs {
		rng := rand.New(rand.NewPCG(uint64(seed), 3))
		var p Replayer
		var all []Record
		var out []handedOut
		system := "system <prompt>"
		var turn int64 = 1
		var prev []chat.Message
		for step := range 30 {
			for range rng.IntN(5) {
				rt := turn
				switch rng.IntN(10) {
				case 0:
					rt = turn + 1 // queued while this turn runs
				case 1:
					rt = max(1, turn-1) // an earlier turn closed late
				case 2:
					rt = rng.Int64N(turn + 3)
				}
				r := randRecord(rng, rt, step*10+len(all))
				all = append(all, r)
				p.Add(r)
			}
			upTo := turn
			switch rng.IntN(10) {
			case 0, 1, 2:
				turn++
				upTo = turn
			case 3:
				upTo = rng.Int64N(turn + 2)
			case 4:
				system = strings.Clone(system) // equal text, another string
			case 5:
				if rng.IntN(4) == 0 {
					system += "!"
				}
			}
			got := p.Messages(system, upTo)
			want := Replay(Baseline{System: system}, all, upTo)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d step %d: Messages(%d) =\n%+v\nReplay =\n%+v", seed, step, upTo, got, want)
			}
			calls++
			if len(prev) > 0 && len(got) >= len(prev) && &got[0] == &prev[0] {
				extended++
			}
			prev = got
			out = append(out, handedOut{got, slices.Clone(got)})
		}
		for i, h := range out {
			if !reflect.DeepEqual(h.msgs, h.copy) {
				t.Fatalf("seed %d: result %d changed after later calls", seed, i)
			}
		}
	}
	if extended < calls/3 {
		t.Fatalf("only %d of %d calls extended the previous result: the incremental path was hardly exercised", extended, calls)
	}
}

// BenchmarkReplay is the replay part of loopd's cost per model call, in a
// log of 1k, 32k and 128k tokens: one turn's records (user, reply with a
// tool call, usage, tool result) are added and the request's messages
// built for the new turn. "full" is Replay of the whole log, as loopd did
// before; "incremental" is the Replayer loopd's session keeps.
func BenchmarkReplay(b *testing.B) {
	para := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20)
	turnRecs := func(t int64) []Record {
		id := fmt.Sprintf("call%d", t)
		return []Record{
			&User{Turn: t, Text: para},
			&Assistant{Turn: t, Message: chat.Message{Role: chat.RoleAssistant, Content: "Let me look.", ReasoningContent: para + para + para,
				ToolCalls: []chat.ToolCall{{ID: id, Type: "function", Function: chat.FunctionCall{Name: "read_file", Arguments: `{"path":"/f"}`}}}}},
			&Usage{Turn: t},
			&ToolResult{Turn: t, CallID: id, Tool: "read_file", Status: wire.StatusRan, Content: para + para + para + para + para + para},
			&TurnEnd{Turn: t},
		}
	}
	for _, size := range []struct {
		name   string
		tokens int
	}{{"1k", 1 << 10}, {"32k", 32 << 10}, {"128k", 128 << 10}} {
		var log []Record
		var t int64
		for bytes := 0; bytes < size.tokens*4; bytes += 10 * len(para) {
			t++
			log = append(log, turnRecs(t)...)
		}
		next := turnRecs(t + 1)
		b.Run(size.name+"/full", func(b *testing.B) {
			recs := append(slices.Clip(log), next...)
			b.ReportAllocs()
			for b.Loop() {
				if len(Replay(Baseline{System: "s"}, recs, t+1)) == 0 {
					b.Fatal("no messages")
				}
			}
		})
		b.Run(size.name+"/incremental", func(b *testing.B) {
			var p Replayer
			p.Add(log...)
			p.Messages("s", t)
			saved := p
			b.ReportAllocs()
			for b.Loop() {
				// Back to where turn t left it; the arrays keep what turn
				// t+1 appended beyond its lengths.
				p.recs, p.msgs = p.recs[:len(saved.recs)], p.msgs[:len(saved.msgs)]
				p.used, p.pending, p.last, p.upTo = saved.used, saved.pending, saved.last, saved.upTo
				p.Add(next...)
				if len(p.Messages("s", t+1)) == 0 {
					b.Fatal("no messages")
				}
			}
		})
	}
}
