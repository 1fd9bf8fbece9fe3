package fleet

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/cmd/memoryd/internal/honcho"
	"wntrmute.dev/boxmaker/cmd/memoryd/internal/recall"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd/honchoconf"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// FuzzFleetHit: whatever a Honcho message's metadata says, a hit from
// an untrusted workspace is memory-tainted, no hit is below private or
// has an unknown source, and boxmaker_id round-trips.
func FuzzFleetHit(f *testing.F) {
	f.Add([]byte(`{"boxmaker_id":"s1-e0-r4","class":"private","source":"memory"}`), true)
	f.Add([]byte(`{"class":"public","source":"identity"}`), false)
	f.Add([]byte(`{"class":"secret","source":"memory-tainted","boxmaker_id":7}`), true)
	f.Add([]byte(`{}`), true)
	f.Fuzz(func(t *testing.T, md []byte, trusted bool) {
		m := honcho.Message{ID: "m", Content: "text", Peer: honchoconf.MustID("p"), Session: honchoconf.MustID("s"), Workspace: honchoconf.MustID("w"),
			Metadata: json.RawMessage(md), CreatedAt: time.Unix(0, 0)}
		h := fleetHit(honchoconf.Source{ID: honchoconf.MustID("w"), Trusted: trusted}, m)
		if !trusted && h.Source != recall.SourceTainted {
			t.Fatalf("untrusted workspace hit labelled %s", h.Source)
		}
		switch h.Source {
		case recall.SourceMemory, recall.SourceTainted, recall.SourceIdentity:
		default:
			t.Fatalf("unknown source %q", h.Source)
		}
		if !h.Class.Valid() || !dataclass.Floor.AtMost(h.Class) {
			t.Fatalf("class %v below the floor", h.Class)
		}
		if id := BoxmakerID(md); id != "" {
			b, _ := json.Marshal(map[string]string{"boxmaker_id": id})
			if BoxmakerID(b) != id {
				t.Fatalf("boxmaker_id %q does not round-trip", id)
			}
		}
	})
}

// FuzzReadTurns: a session log of any content is read or refused, never
// half-read into a turn, and no turn carries a tool result's text.
func FuzzReadTurns(f *testing.F) {
	f.Add([]byte(`{"type":"user","turn":1,"text":"hi"}
{"type":"assistant","turn":1,"message":{"role":"assistant","content":"","tool_calls":[{"id":"c","type":"function","function":{"name":"x","arguments":"{}"}}]}}
{"type":"tool_result","turn":1,"call_id":"c","tool":"x","status":"ok","content":"TOOLTEXT","truncated":false,"class":"private","untrusted":true}
{"type":"assistant","turn":1,"message":{"role":"assistant","content":"bye","reasoning_content":"think"}}
{"type":"turn_end","turn":1}
`))
	dir := filepath.Join(f.TempDir(), "s1")
	os.MkdirAll(dir, 0o700)
	p := filepath.Join(dir, "0.jsonl")
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		turns, err := ReadTurns(p)
		if err != nil {
			if turns != nil {
				t.Fatalf("refused log gave turns: %+v", turns)
			}
			return
		}
		for _, tr := range turns {
			if !tr.Labels.Taint.Valid() || tr.Session != "s1" {
				t.Fatalf("turn %+v", tr)
			}
			for _, l := range append(tr.Said, func() []Line {
				if tr.Reply != nil {
					return []Line{*tr.Reply}
				}
				return nil
			}()...) {
				if l.Text == "TOOLTEXT" {
					t.Fatal("a tool result's text was read as a message")
				}
			}
		}
	})
}
