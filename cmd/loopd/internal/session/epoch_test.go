package session

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/socket/wire"

	"wntrmute.dev/boxmaker/pkg/model/chat"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

func base0() (sessionlog.Baseline, error) {
	return sessionlog.Baseline{System: "epoch 0", Tools: []chat.Tool{}}, nil
}

// TestChangeAndReopen: a change writes the next epoch's head (trust and
// the hash of the last line) and summary, moves the waiting message, and
// a reopened session is at the new epoch with the same trust; a stray
// baseline of a later epoch (a crash before its log) is ignored; an old
// epoch edited after it ended is refused when the next one is opened.
func TestChangeAndReopen(t *testing.T) {
	state := t.TempDir()
	s, err := Open(state, "s1", base0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []sessionlog.Record{&sessionlog.User{Turn: 1, Text: "read it"},
		&sessionlog.ToolResult{Turn: 1, CallID: "c", Tool: "read_file", Status: wire.StatusRan, Content: "page", Label: dataclass.Label{Class: dataclass.Secret, Untrusted: true}},
		&sessionlog.TurnEnd{Turn: 1}, &sessionlog.User{Turn: 2, Text: "waiting"}} {
		if err := s.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	want := s.Trust()
	ns, err := s.Change(sessionlog.Baseline{System: "epoch 1", Tools: []chat.Tool{}}, sessionlog.Summary{Text: "read a page"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ns.Epoch != 1 || ns.Trust() != want || !want.Untrusted || want.Taint != dataclass.Secret {
		t.Fatalf("new epoch %d, trust %+v, want 1 and %+v (untrusted, secret)", ns.Epoch, ns.Trust(), want)
	}
	if st := StateOf(ns.Records()); st.Waiting != 2 || st.Interrupted != 0 || st.NextTurn != 2 {
		t.Errorf("new epoch state %+v, want turn 2 waiting", st)
	}
	ns.Close()
	dir := Dir(state, "s1")
	os.WriteFile(filepath.Join(dir, "2.baseline.json"), []byte(`{"system":"stray","tools":null}`), 0o640)
	os.WriteFile(filepath.Join(dir, "2.jsonl.tmp"), []byte(`{"type":"head"`), 0o640)
	r, err := Open(state, "s1", base0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Epoch != 1 || r.Baseline.System != "epoch 1" || r.Trust() != want || len(r.Records()) != 3 {
		t.Fatalf("reopened at epoch %d (%q), %d records, trust %+v", r.Epoch, r.Baseline.System, len(r.Records()), r.Trust())
	}
	r.Close()
	f, _ := os.OpenFile(filepath.Join(dir, "0.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"type":"turn_end","turn":9}` + "\n")
	f.Close()
	if _, err := Open(state, "s1", base0); err == nil || !strings.Contains(err.Error(), "session-log-damaged") || !strings.Contains(err.Error(), "epoch 0 was changed") {
		t.Fatalf("Open after epoch 0 was edited = %v, want a refusal", err)
	}
}
