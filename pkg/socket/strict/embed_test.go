package strict

import (
	"strings"
	"testing"
)

type shared struct {
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
}

type withShared struct {
	Session string `json:"session"`
	shared
	Taint string `json:"taint"`
}

// TestEmbeddedStruct: an untagged embedded struct's fields are checked at
// its place, as encoding/json writes them, with the same strictness.
func TestEmbeddedStruct(t *testing.T) {
	var v withShared
	if err := Unmarshal([]byte(`{"session":"s","outcome":"ok","taint":"private"}`), &v); err != nil {
		t.Fatalf("Unmarshal = %v", err)
	}
	if v.Session != "s" || v.Outcome != "ok" || v.Taint != "private" {
		t.Errorf("decoded %+v", v)
	}
	b, err := Marshal(withShared{Session: "s", shared: shared{Outcome: "ok", Reason: "r"}, Taint: "p"})
	if want := `{"session":"s","outcome":"ok","reason":"r","taint":"p"}`; err != nil || string(b) != want {
		t.Errorf("Marshal = %s, %v; want %s (embedded fields in place)", b, err, want)
	}
	for _, tt := range []struct{ in, want string }{
		{`{"session":"s","taint":"p"}`, "outcome: missing field"},
		{`{"session":"s","outcome":"ok","taint":"p","extra":1}`, "extra: unknown field"},
		{`{"session":"s","Outcome":"ok","taint":"p"}`, "key case differs"},
		{`{"session":"s","outcome":"ok","outcome":"no","taint":"p"}`, "duplicate"},
		{`{"session":"s","outcome":"ok","taint":"p","shared":{}}`, "shared: unknown field"},
	} {
		var w withShared
		if err := Unmarshal([]byte(tt.in), &w); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Unmarshal(%s) = %v, want an error containing %q", tt.in, err, tt.want)
		}
	}
}

// TestEmbeddingRefused: a pointer or tagged embedding, and a JSON name
// declared twice, are refused rather than resolved the way encoding/json
// would silently resolve them.
func TestEmbeddingRefused(t *testing.T) {
	type collide struct {
		shared
		Outcome string `json:"outcome"`
	}
	type viaPointer struct {
		*shared
	}
	type tagged struct {
		shared `json:"s"`
	}
	for name, v := range map[string]any{"collision": &collide{}, "pointer": &viaPointer{}, "tagged": &tagged{}} {
		if err := Unmarshal([]byte(`{"outcome":"x"}`), v); err == nil {
			t.Errorf("%s: Unmarshal accepted a struct whose names encoding/json resolves by its own rules", name)
		}
	}
}
