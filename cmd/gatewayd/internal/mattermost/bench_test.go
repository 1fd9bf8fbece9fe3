package mattermost

import (
	"strings"
	"testing"
)

// BenchmarkParsePosted decodes a posted event with a 4 KB message, the
// per-event cost on the WebSocket reader.
func BenchmarkParsePosted(b *testing.B) {
	ev := postedEvent(`{"id":"`+pid+`","user_id":"`+uid+`","channel_id":"`+cid+`","message":"`+strings.Repeat("x", 4096)+`","props":{},"metadata":{}}`, `,"mentions":"[\"`+uid+`\"]"`)
	b.SetBytes(int64(len(ev)))
	for b.Loop() {
		e, err := ParseEvent(ev)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ParsePosted(e); err != nil {
			b.Fatal(err)
		}
	}
}
