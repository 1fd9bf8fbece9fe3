package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/tools"
	"wntrmute.dev/boxmaker/pkg/logs/jsonl"
	"wntrmute.dev/boxmaker/pkg/model/chat"
)

// TestGolden: each record type's golden file decodes strictly and
// re-encodes to the same bytes; every type has one.
func TestGolden(t *testing.T) {
	for _, tag := range sessionlog.Records.Tags() {
		want, err := os.ReadFile(filepath.Join("testdata", tag+".json"))
		if err != nil {
			t.Errorf("record %q has no golden file", tag)
			continue
		}
		r, err := sessionlog.Records.Decode(want)
		if err != nil {
			t.Errorf("Decode(%s): %v", tag, err)
			continue
		}
		got, _ := sessionlog.Records.Encode(r)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: Encode(Decode(golden)) =\n%s\nwant\n%s", tag, got, want)
		}
	}
	for _, bad := range []string{
		`{"type":"tool_result","turn":1,"call_id":"c","tool":"t","status":"maybe","content":"","truncated":false,"class":"public","untrusted":false}`,
		`{"type":"user","turn":1}`,
		`{"type":"user","turn":1.5,"text":"x"}`,
		`{"type":"usage","turn":1,"cache_n":1,"prompt_n":1,"predicted_n":1,"prompt_us":1.5,"predicted_us":1,"prompt_tokens":1,"reasoning_tokens":0,"cap_fired":false,"cache_gap":0}`,
	} {
		if _, err := sessionlog.Records.Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%s) succeeded", bad)
		}
	}
}

func base() (sessionlog.Baseline, error) {
	return sessionlog.Baseline{System: "sys", Tools: tools.Core(false)}, nil
}

func TestBaselineSnapshotKept(t *testing.T) {
	state := t.TempDir()
	s, err := Open(state, "s1", base)
	if err != nil {
		t.Fatal(err)
	}
	s.Append(&sessionlog.User{Turn: 1, Text: "hi"})
	s.Close()
	s2, err := Open(state, "s1", func() (sessionlog.Baseline, error) {
		return sessionlog.Baseline{System: "an edited prompt"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.Baseline.System != "sys" || len(s2.Baseline.Tools) != len(tools.Core(false)) {
		t.Errorf("resumed baseline = %+v, want the snapshot: edits apply to later epochs only", s2.Baseline)
	}
	if len(s2.Records()) != 1 {
		t.Errorf("records after reopen = %d", len(s2.Records()))
	}
	if _, err := Open(state, "../x", base); err == nil {
		t.Error("Open accepted a session id that is a path")
	}
}

func TestTornAndDamagedLogsRefused(t *testing.T) {
	state := t.TempDir()
	s, _ := Open(state, "s1", base)
	s.Append(&sessionlog.User{Turn: 1, Text: "hi"})
	s.Close()
	log := filepath.Join(Dir(state, "s1"), "0.jsonl")
	good, _ := os.ReadFile(log)
	os.WriteFile(log, append(append([]byte(nil), good...), `{"type":"user","tu`...), 0o600)
	_, err := Open(state, "s1", base)
	var te *jsonl.TornError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "see docs/runbook.md#torn-log") {
		t.Errorf("Open(torn) = %v, want a torn-log refusal", err)
	}
	os.WriteFile(log, append(append([]byte(nil), good...), "{\"type\":\"user\",\"turn\":2,\"text\":\"x\",\"extra\":1}\n"...), 0o600)
	if _, err := Open(state, "s1", base); err == nil || !strings.Contains(err.Error(), "0.jsonl:2:") || !strings.Contains(err.Error(), "see docs/runbook.md#session-log-damaged") {
		t.Errorf("Open(damaged) = %v, want the line named and the runbook entry", err)
	}
}

// TestBaselineBudget: the baseline without memory (system prompt, core
// tool schemas) stays within 3,000 tokens; TestStackBaselineBudget in
// cmd/loopd measures it with memoryd's identity block and full files. Here
// the fake's tokenizer stands in for the server's; the device check with
// the real tokenizer runs on the inference host.
func TestBaselineBudget(t *testing.T) {
	system, err := os.ReadFile("../loop/system.md")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{
		"model":    "fake-model",
		"messages": []chat.Message{{Role: "system", Content: strings.TrimSpace(string(system))}, {Role: "user", Content: "x"}},
		"tools":    tools.Core(false),
	})
	prompt, err := fake.RenderPrompt(body)
	if err != nil {
		t.Fatal(err)
	}
	n := len(fake.Tokenize(prompt))
	t.Logf("baseline: %d tokens by the fake's tokenizer", n)
	if n > 3000 {
		t.Errorf("baseline is %d tokens, over the budget of 3,000", n)
	}
}
