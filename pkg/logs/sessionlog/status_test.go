package sessionlog

import (
	"reflect"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// TestStatusWords: a line of every status, as loopd has always written
// it, decodes to the one status and re-encodes to the same bytes (old
// epochs are hash-linked and replay byte for byte).
func TestStatusWords(t *testing.T) {
	for _, tt := range []struct {
		word string
		want wire.ToolStatus
	}{
		{"ok", wire.StatusRan},
		{"error", wire.StatusFailed},
		{"denied", wire.StatusDenied},
		{"not_run", wire.StatusNotRun},
		{"interrupted", wire.StatusInterrupted},
	} {
		line := `{"type":"tool_result","turn":3,"call_id":"c1","tool":"read_file","status":"` + tt.word +
			`","content":"a <&> b","truncated":false,"class":"private","untrusted":true,"posted":{"id":"0123456789abcdef0123456789abcdef","name":"a.txt","size":3}}`
		r, err := Records.Decode([]byte(line))
		if err != nil {
			t.Fatalf("Decode(%s) = %v", line, err)
		}
		tr := r.(*ToolResult)
		if tr.Status != tt.want || tr.Content != "a <&> b" || !tr.Untrusted || tr.Posted == nil || tr.Posted.Size != 3 {
			t.Errorf("Decode(%q) = %+v, want status %q", tt.word, tr, tt.want)
		}
		got, err := Records.Encode(tr)
		if err != nil || string(got) != line {
			t.Errorf("Encode(Decode(%q)) = %s, %v; want the same bytes", tt.word, got, err)
		}
		if Word(tt.want) != tt.word {
			t.Errorf("Word(%q) = %q, want %q", tt.want, Word(tt.want), tt.word)
		}
	}
}

// TestStatusRefusals: broker.sock's spelling never reached the log, and
// the record stays as strict as every other.
func TestStatusRefusals(t *testing.T) {
	const head = `{"type":"tool_result","turn":1,"call_id":"c","tool":"clock",`
	const tail = `"content":"x","truncated":false,"class":"public","untrusted":false}`
	for _, tt := range []struct{ in, want string }{
		{head + `"status":"ran",` + tail, `unknown tool result status "ran"`},
		{head + `"status":"failed",` + tail, `unknown tool result status "failed"`},
		{head + `"status":"OK",` + tail, "unknown tool result status"},
		{head + `"status":"ok","extra":1,` + tail, "extra: unknown field"},
		{head + `"status":"ok",` + `"content":"x","class":"public","untrusted":false}`, "truncated: missing field"},
		{head + `"status":"ok","Content":"y",` + tail, "key case differs"},
		{head + `"status":"ok","status":"ok",` + tail, "duplicate key"},
		{head + `"status":"ok",` + `"content":"x","truncated":false,"class":"loud","untrusted":false}`, "class"},
	} {
		if _, err := Records.Decode([]byte(tt.in)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Decode(%s) = %v, want an error containing %q", tt.in, err, tt.want)
		}
	}
	if _, err := Records.Encode(&ToolResult{Status: "ran?"}); err == nil {
		t.Error("Encode of a status with no word in the log succeeded")
	}
}

// TestLoggedResultMirrors is the tripwire for the record's encoding: a
// field added to ToolResult and not to loggedResult (or in another
// order, or under another name) fails here, not in an owner's log.
func TestLoggedResultMirrors(t *testing.T) {
	rt, lt := reflect.TypeFor[ToolResult](), reflect.TypeFor[loggedResult]()
	if lt.Field(0).Name != "Type" || lt.NumField() != rt.NumField()+1 {
		t.Fatalf("loggedResult has %d fields, want Type then ToolResult's %d", lt.NumField(), rt.NumField())
	}
	for i := range rt.NumField() {
		r, l := rt.Field(i), lt.Field(i+1)
		if r.Name != l.Name || r.Tag != l.Tag {
			t.Errorf("field %d: ToolResult has %s `%s`, loggedResult %s `%s`", i, r.Name, r.Tag, l.Name, l.Tag)
		}
		if r.Name == "Status" {
			if r.Type != reflect.TypeFor[wire.ToolStatus]() || l.Type.Kind() != reflect.String {
				t.Errorf("Status: %s and %s, want wire.ToolStatus and the log's word", r.Type, l.Type)
			}
			continue
		}
		if r.Type != l.Type {
			t.Errorf("field %s: %s in ToolResult, %s in loggedResult", r.Name, r.Type, l.Type)
		}
	}
}
