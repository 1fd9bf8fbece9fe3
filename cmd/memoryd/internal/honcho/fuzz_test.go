package honcho

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

// Each decoder of a Honcho answer is fuzzed with the round-trip property:
// whatever it accepts re-encodes, in Honcho's shape, to bytes it decodes
// to the same value; whatever it refuses yields the zero value.

const seedMsgs = `[{"id":"m1","content":"hi <&>","peer_id":"p","session_id":"s","metadata":{"k":"v"},"created_at":"2025-01-01T00:00:00.123456Z","workspace_id":"w","token_count":1}]`

func reencode(t *testing.T, v any) []byte {
	t.Helper()
	b, err := strict.Marshal(v)
	if err != nil {
		t.Fatalf("re-encode: %v", err)
	}
	return b
}

func stampOf(tm time.Time) string { return tm.Format(time.RFC3339Nano) }

func FuzzDecodeWorkspace(f *testing.F) {
	f.Add([]byte(goodWS))
	f.Add([]byte(`{"id":"w","metadata":{"a":[1,{"b":null}]},"configuration":{},"created_at":"2025-01-01T00:00:00+02:00"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := DecodeWorkspace(b)
		if err != nil {
			if !reflect.DeepEqual(w, Workspace{}) {
				t.Fatalf("refused input left data: %+v", w)
			}
			return
		}
		again, err := DecodeWorkspace(reencode(t, workspaceJSON{w.ID.String(), w.Metadata, w.Configuration, stampOf(w.CreatedAt)}))
		if err != nil || again.ID != w.ID || !again.CreatedAt.Equal(w.CreatedAt) || !bytes.Equal(again.Metadata, w.Metadata) {
			t.Fatalf("round trip: %+v, %v; was %+v", again, err, w)
		}
	})
}

func FuzzDecodePeer(f *testing.F) {
	f.Add([]byte(`{"id":"p","workspace_id":"w","created_at":"2025-01-01T00:00:00Z","metadata":{},"configuration":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodePeer(b)
		if err != nil {
			if !reflect.DeepEqual(p, Peer{}) {
				t.Fatalf("refused input left data: %+v", p)
			}
			return
		}
		again, err := DecodePeer(reencode(t, peerJSON{p.ID.String(), p.Workspace.String(), stampOf(p.CreatedAt), p.Metadata, p.Configuration}))
		if err != nil || again.ID != p.ID || again.Workspace != p.Workspace || !again.CreatedAt.Equal(p.CreatedAt) {
			t.Fatalf("round trip: %+v, %v; was %+v", again, err, p)
		}
	})
}

func FuzzDecodeSession(f *testing.F) {
	f.Add([]byte(`{"id":"s","is_active":true,"workspace_id":"w","metadata":{},"configuration":{},"created_at":"2025-01-01T00:00:00Z"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSession(b)
		if err != nil {
			if !reflect.DeepEqual(s, Session{}) {
				t.Fatalf("refused input left data: %+v", s)
			}
			return
		}
		again, err := DecodeSession(reencode(t, sessionJSON{s.ID.String(), s.Active, s.Workspace.String(), s.Metadata, s.Configuration, stampOf(s.CreatedAt)}))
		if err != nil || again.ID != s.ID || again.Active != s.Active || again.Workspace != s.Workspace {
			t.Fatalf("round trip: %+v, %v; was %+v", again, err, s)
		}
	})
}

func FuzzDecodeMessages(f *testing.F) {
	f.Add([]byte(seedMsgs))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := DecodeMessages(b)
		if err != nil {
			if ms != nil {
				t.Fatalf("refused input left data: %+v", ms)
			}
			return
		}
		js := make([]messageJSON, len(ms))
		for i, m := range ms {
			if !utf8.ValidString(m.Content) {
				t.Fatalf("accepted invalid UTF-8 content %q", m.Content)
			}
			js[i] = messageJSON{m.ID, m.Content, m.Peer.String(), m.Session.String(), m.Metadata, stampOf(m.CreatedAt), m.Workspace.String(), m.TokenCount}
		}
		again, err := DecodeMessages(reencode(t, js))
		if err != nil || len(again) != len(ms) {
			t.Fatalf("round trip: %d, %v; was %d", len(again), err, len(ms))
		}
		for i := range ms {
			if again[i].Content != ms[i].Content || again[i].ID != ms[i].ID || !again[i].CreatedAt.Equal(ms[i].CreatedAt) {
				t.Fatalf("round trip [%d]: %+v; was %+v", i, again[i], ms[i])
			}
		}
	})
}

func FuzzDecodeAnswer(f *testing.F) {
	f.Add([]byte(`{"content":"the owner prefers tea"}`))
	f.Add([]byte(`{"content":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := DecodeAnswer(b)
		if err != nil {
			if a != (Answer{}) {
				t.Fatalf("refused input left data: %+v", a)
			}
			return
		}
		if a.Empty != (a.Content == "") {
			t.Fatalf("Empty %v with content %q", a.Empty, a.Content)
		}
		var c *string
		if !a.Empty {
			c = &a.Content
		}
		if again, err := DecodeAnswer(reencode(t, chatJSON{c})); err != nil || again != a {
			t.Fatalf("round trip: %+v, %v; was %+v", again, err, a)
		}
	})
}

func FuzzDecodeHealth(f *testing.F) {
	f.Add([]byte(`{"status":"ok"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if DecodeHealth(b) == nil && DecodeHealth(reencode(t, healthJSON{"ok"})) != nil {
			t.Fatal("health round trip")
		}
	})
}

func FuzzDecodeError(f *testing.F) {
	f.Add([]byte(`{"detail":"Resource not found"}`))
	f.Add([]byte(`{"detail":[{"type":"missing","loc":["body","query"],"msg":"Field required","input":{"secret":"text"}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e := DecodeError("op", 422, b)
		if e.Status != 422 || len([]rune(e.Detail)) > maxDetail+1 || len(e.Fields) > 5 {
			t.Fatalf("DecodeError = %+v", e)
		}
		for _, r := range e.Detail {
			if r < 0x20 || r == 0x7f {
				t.Fatalf("control character in detail %q", e.Detail)
			}
		}
		// The echoed input never reaches the message.
		var eb struct {
			Detail []struct {
				Input json.RawMessage `json:"input"`
			} `json:"detail"`
		}
		if json.Unmarshal(b, &eb) == nil {
			for _, d := range eb.Detail {
				if s := string(d.Input); len(s) > 8 && !strings.ContainsAny(s, "\"{}[]") && strings.Contains(e.Error(), s) {
					t.Fatalf("input %s echoed in %q", s, e.Error())
				}
			}
		}
	})
}
