package llama

import (
	"bytes"
	"encoding/json"
	"go/parser"
	"go/token"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/model/chat"
)

// jsonUnmarshalStrict decodes b refusing unknown fields, so a test notices a
// field the client sends that its own types do not know.
func jsonUnmarshalStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

var goldenRequest = Request{
	Messages: []chat.Message{
		{Role: chat.RoleSystem, Content: "You are <Boxmaker> & co."},
		{Role: chat.RoleUser, Content: "hi"},
		{Role: chat.RoleAssistant, ReasoningContent: "r", ToolCalls: []chat.ToolCall{{ID: "a", Type: "function", Function: chat.FunctionCall{Name: "clock", Arguments: "{}"}}}},
		{Role: chat.RoleTool, Content: "12:00", ToolCallID: "a", Name: "clock"},
	},
	Tools: []chat.Tool{chat.NewTool("clock", "Current time.", json.RawMessage(`{"type": "object", "properties": {}}`))},
}

// TestRequestGolden is a tripwire on the request wire: field names, order,
// omitted fields and escaping. A change here changes every prompt's bytes.
func TestRequestGolden(t *testing.T) {
	c, err := New(Config{BaseURL: "http://127.0.0.1:1", Model: "ornith", IDSlot: 1})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.fullBody(goldenRequest)
	if err != nil {
		t.Fatal(err)
	}
	want := readGolden(t, "request.golden.json")
	if !bytes.Equal(got, want) {
		t.Fatalf("fullBody =\n%s\nwant\n%s", got, want)
	}
	// The body the client sends: a first request (nothing cached), the
	// same request again (all of it cached), and a prefix of it followed
	// by the whole (the last messages added to the cache).
	for i, req := range []Request{goldenRequest, goldenRequest, {Messages: goldenRequest.Messages[:2], Tools: goldenRequest.Tools}, goldenRequest} {
		body, err := c.chatBody(req)
		if err != nil {
			t.Fatal(err)
		}
		full, _ := c.fullBody(req)
		if !bytes.Equal(body.bytes(), full) || (len(req.Messages) == len(goldenRequest.Messages) && !bytes.Equal(full, want)) {
			t.Fatalf("chatBody (request %d) =\n%s\nwant\n%s", i, body.bytes(), full)
		}
	}
}

func TestRequestRejectsBadSchema(t *testing.T) {
	c, err := New(Config{BaseURL: "http://127.0.0.1:1", Model: "ornith"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.fullBody(Request{Messages: []chat.Message{{Role: chat.RoleUser, Content: "x"}}, Tools: []chat.Tool{chat.NewTool("t", "", json.RawMessage(`{nope`))}})
	if err == nil {
		t.Fatal("fullBody with an invalid schema succeeded")
	}
	_, err = c.chatBody(Request{Messages: []chat.Message{{Role: chat.RoleUser, Content: "x"}}, Tools: []chat.Tool{chat.NewTool("t", "", json.RawMessage(`{nope`))}})
	if err == nil {
		t.Fatal("chatBody with an invalid schema succeeded")
	}
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		err  string
	}{
		{"url", Config{BaseURL: "http://127.0.0.1:8080/", Model: "m"}, ""},
		{"url with prefix", Config{BaseURL: "https://host/llama", Model: "m"}, ""},
		{"socket", Config{SocketPath: "/run/inferproxy/socket", Model: "m"}, ""},
		{"neither", Config{Model: "m"}, "exactly one"},
		{"both", Config{BaseURL: "http://h", SocketPath: "/s", Model: "m"}, "exactly one"},
		{"no model", Config{BaseURL: "http://h"}, "model is required"},
		{"bad scheme", Config{BaseURL: "ftp://h", Model: "m"}, "must be http"},
		{"query", Config{BaseURL: "http://h/?a=b", Model: "m"}, "must be http"},
		{"userinfo", Config{BaseURL: "http://u:p@h", Model: "m"}, "must be http"},
		{"slot", Config{BaseURL: "http://h", Model: "m", IDSlot: -2}, "below -1"},
		{"negative idle", Config{BaseURL: "http://h", Model: "m", IdleTimeout: -1}, "negative"},
		{"nan", Config{BaseURL: "http://h", Model: "m", Sampling: &Sampling{Temperature: nan(), TopP: 1}}, "finite"},
		{"negative top_k", Config{BaseURL: "http://h", Model: "m", Sampling: &Sampling{TopK: -1}}, "top_k"},
		{"negative max tokens", Config{BaseURL: "http://h", Model: "m", MaxTokens: -1}, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.cfg)
			if tt.err == "" {
				if err != nil {
					t.Fatalf("New = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.HasPrefix(err.Error(), "configure llama client: ") {
				t.Fatalf("New = %v, %v; want error containing %q", c, err, tt.err)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	c, err := New(Config{BaseURL: "http://h", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if c.sampling != (Sampling{0.6, 0.95, 20}) || c.thinkingCap != 4096 || c.maxTokens != 8192 ||
		c.firstByte != DefaultFirstByteTimeout || c.modelLoad != DefaultModelLoadTimeout || c.idle != DefaultIdleTimeout ||
		c.maxEvent != DefaultMaxEventBytes || c.base != "http://h" {
		t.Fatalf("defaults not applied: %+v", c)
	}
	c, err = New(Config{BaseURL: "http://h", Model: "m", ThinkingCap: -1, Sampling: &Sampling{Temperature: 0, TopP: 1, TopK: 0}})
	if err != nil {
		t.Fatal(err)
	}
	if c.thinkingCap != 0 || c.sampling.Temperature != 0 {
		t.Fatalf("ThinkingCap -1 / explicit sampling not kept: %+v", c)
	}
}

func nan() float64 {
	var zero float64
	return zero / zero
}

// TestPackageDoc: every package has a doc comment (style.md).
func TestPackageDoc(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	if f.Doc == nil || !strings.HasPrefix(f.Doc.Text(), "Package llama ") {
		t.Fatal("doc.go has no package doc comment")
	}
}
