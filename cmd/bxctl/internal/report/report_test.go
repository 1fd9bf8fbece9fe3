package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/model/chat"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

var (
	update = flag.Bool("update", false, "rewrite the golden reports")
	regen  = flag.Bool("regen", false, "write testdata/state's logs anew (then -update)")
)

const recorded = "testdata/state"

// TestVerdict is the decision log's rule at its edges.
func TestVerdict(t *testing.T) {
	for _, c := range []struct {
		fired, n int
		want     string
	}{
		{0, 0, VerdictTooFew}, {100, 199, VerdictTooFew}, {10, 200, VerdictKeep}, {11, 200, VerdictRaise},
		{0, 200, VerdictKeep}, {50, 1000, VerdictKeep}, {51, 1000, VerdictRaise},
	} {
		if got := Verdict(c.fired, c.n); got.Verdict != c.want {
			t.Errorf("Verdict(%d, %d) = %+v, want %s", c.fired, c.n, got, c.want)
		}
	}
}

func TestDist(t *testing.T) {
	d := distOf([]int64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6})
	if d != (Dist{N: 10, Sum: 55, Min: 1, P50: 5, P90: 9, P99: 10, Max: 10}) {
		t.Errorf("distOf = %+v", d)
	}
	if (distOf(nil) != Dist{}) {
		t.Error("distOf(nil) is not zero")
	}
}

// TestReportGolden: the report of the recorded logs, as a table and as
// JSON, including the cap rule's verdict.
func TestReportGolden(t *testing.T) {
	if *regen {
		writeRecorded(t)
	}
	r, err := Collect(recorded, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Cap.Verdict != VerdictRaise || r.Completions < CapMinCompletions {
		t.Errorf("the recorded logs' verdict: %+v over %d completions", r.Cap, r.Completions)
	}
	var text, js bytes.Buffer
	r.WriteText(&text)
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	golden(t, "testdata/report.txt", text.Bytes())
	golden(t, "testdata/report.json", js.Bytes())
	if strings.Contains(js.String(), ".") && bytes.Contains(js.Bytes(), []byte(`": 0.`)) {
		t.Error("the JSON holds a float")
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update):\n%s", path, got)
	}
}

// TestReportSince: --since keeps audit records from then and session
// logs written since; an old stop record counts as a cap fire when no
// usage record of its turn says so, once.
func TestReportSince(t *testing.T) {
	state := t.TempDir()
	sess := filepath.Join(layout.Sessions.In(state), "old")
	os.MkdirAll(sess, 0o700)
	var b bytes.Buffer
	for _, rec := range []sessionlog.Record{
		&sessionlog.User{Turn: 1, Text: "q"},
		&sessionlog.Assistant{Turn: 1, Message: chat.Message{Role: "assistant"}},
		&sessionlog.Usage{Turn: 1, ReasoningTokens: 4096, CapFired: true},
		&sessionlog.Stopped{Turn: 1, Reason: wire.StopThinkingCap, Msg: "stopped"},
		&sessionlog.TurnEnd{Turn: 1},
		&sessionlog.User{Turn: 2, Text: "q"},
		&sessionlog.Assistant{Turn: 2, Message: chat.Message{Role: "assistant"}},
		&sessionlog.Usage{Turn: 2, ReasoningTokens: 4096},
		&sessionlog.Stopped{Turn: 2, Reason: wire.StopThinkingCap, Msg: "stopped"},
		&sessionlog.TurnEnd{Turn: 2},
	} {
		line, _ := sessionlog.Records.Encode(rec)
		b.Write(append(line, '\n'))
	}
	log := filepath.Join(sess, "0.jsonl")
	os.WriteFile(log, b.Bytes(), 0o600)
	r, err := Collect(state, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Cap.Fired != 2 || r.Completions != 2 || r.Turns != 2 {
		t.Errorf("cap fired %d over %d completions, %d turns; want 2, 2, 2", r.Cap.Fired, r.Completions, r.Turns)
	}
	old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	os.Chtimes(log, old, old)
	if r, _ := Collect(state, old.Add(time.Hour)); r.SessionLogs != 0 || r.Completions != 0 {
		t.Errorf("a log written before since was read: %+v", r)
	}
	os.WriteFile(log, append(b.Bytes(), `{"type":"usage","turn":3}`+"\n"...), 0o600)
	if _, err := Collect(state, time.Time{}); err == nil || !strings.Contains(err.Error(), "0.jsonl:11") {
		t.Errorf("a record that does not decode: %v", err)
	}
}

// writeRecorded writes the recorded state: three sessions of turns (some
// with a tool call, some with the cap firing, cache losses, a turn of an
// older loopd that stopped at the cap) and an audit log written by the
// real writer on a fixed clock.
func writeRecorded(t *testing.T) {
	os.RemoveAll(recorded)
	enc := func(recs ...sessionlog.Record) []byte {
		var b bytes.Buffer
		for _, r := range recs {
			line, err := sessionlog.Records.Encode(r)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(append(line, '\n'))
		}
		return b.Bytes()
	}
	k := 0
	for s, turns := range []int{90, 70, 45} {
		dir := filepath.Join(layout.Sessions.In(recorded), fmt.Sprintf("s%d", s+1))
		os.MkdirAll(dir, 0o755)
		var log []byte
		for n := int64(1); n <= int64(turns); n++ {
			k++
			log = append(log, enc(&sessionlog.User{Turn: n, Text: "question"})...)
			completions := 1 + k%3/2 // every third turn calls a tool
			for c := 0; c < completions; c++ {
				msg := chat.Message{Role: "assistant", Content: "answer"}
				if c < completions-1 {
					msg = chat.Message{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "c1", Type: "function", Function: chat.FunctionCall{Name: "call_tool", Arguments: `{}`}}}}
				}
				capped := (k*7+c)%17 == 0
				reasoning := 200 + (k*131+c*37)%3000
				if capped {
					reasoning = 4096
				}
				gap := 1
				if k%23 == 0 && c == 0 {
					gap = 1500 + k
				}
				u := &sessionlog.Usage{Turn: n, CacheN: 1000 * int(n), PromptN: 40 + k%50, PredictedN: reasoning + 30,
					PromptUS: int64(20000 + k%7*1000 + gap*300), PredictedUS: int64((reasoning + 30) * 25000), PromptTokens: 1000*int(n) + 40,
					ReasoningTokens: reasoning, CapFired: capped, CacheGap: gap}
				log = append(log, enc(&sessionlog.Assistant{Turn: n, Message: msg}, u)...)
				if gap > 1 {
					log = append(log, enc(&sessionlog.CacheLoss{Turn: n, Tokens: gap, PrevTotal: 1000*int(n) + gap, Cached: 1000 * int(n)})...)
				}
				if c < completions-1 {
					status := []wire.ToolStatus{wire.StatusRan, wire.StatusRan, wire.StatusDenied, wire.StatusFailed}[k%4]
					tool := []string{"read_file", "shell", "recall", "http_fetch", "consult"}[k%5]
					log = append(log, enc(&sessionlog.ToolResult{Turn: n, CallID: "c1", Tool: tool, Status: status, Content: "out", Label: dataclass.Label{Class: dataclass.Private}})...)
				}
			}
			if s == 2 && n == 40 { // an older loopd: the turn stopped at the cap, its usage not marked
				log = append(log, enc(&sessionlog.Stopped{Turn: n, Reason: wire.StopThinkingCap, Msg: "the model thought for 4096 tokens"})...)
			}
			log = append(log, enc(&sessionlog.TurnEnd{Turn: n})...)
		}
		if err := os.WriteFile(filepath.Join(dir, "0.jsonl"), log, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	os.MkdirAll(layout.Audit.In(recorded), 0o755)
	w, err := audit.Open(layout.Audit.In(recorded), audit.Options{Now: func() time.Time { now = now.Add(47 * time.Minute); return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	dec := func(tool string, o audit.Outcome, reason audit.Reason) int64 {
		seq, err := w.Append(&audit.Decision{Record: audit.DecisionRecord{Session: "s1", Tool: tool, Arguments: json.RawMessage(`{}`),
			Verdict: audit.Verdict{Outcome: o, Reason: reason, Taint: dataclass.Private}}})
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	res := func(d int64) {
		if _, err := w.Append(&audit.Result{Decision: d, SHA256: strings.Repeat("0a", 32), Size: 3, Class: dataclass.Private}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 30; i++ {
		tool := []string{"read_file", "shell", "recall", "http_fetch", "consult"}[i%5]
		switch i % 6 {
		case 0, 1, 2:
			res(dec(tool, audit.Allowed, ""))
		case 3:
			dec(tool, audit.Denied, audit.NoGrant)
		default:
			d := dec(tool, audit.Ask, "")
			answer, by, v := audit.AnswerApproved, "mattermost:u1", audit.Verdict{Outcome: audit.Allowed, Taint: dataclass.Private}
			if i%4 == 0 {
				answer, by, v = audit.AnswerExpired, "", audit.Verdict{Outcome: audit.Denied, Reason: audit.Expired, Taint: dataclass.Private}
			} else if i%5 == 0 {
				by = "admin.sock:uid 1000"
			}
			if _, err := w.Append(&audit.Approval{Decision: d, Answer: answer, Approver: by, Verdict: v}); err != nil {
				t.Fatal(err)
			}
			if answer == audit.AnswerApproved {
				res(d)
			}
		}
	}
}
