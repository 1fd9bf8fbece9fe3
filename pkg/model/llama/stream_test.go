package llama

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"wntrmute.dev/boxmaker/pkg/model/chat"
)

// goldenWants are the results of the golden transcripts, written by hand
// from the transcripts' fragments (not produced by the code under test).
var goldenWants = []struct {
	file string
	want *Completion
	err  func(error) bool
}{
	{
		file: "reasoning_content.sse",
		want: &Completion{
			ID: testID, Model: "ornith", SystemFingerprint: "b10587-3f545bec",
			Message: chat.Message{
				Role:             "assistant",
				Content:          "Hello <world> &amp; \u2028 😀\n\ntab\there \\n done.",
				ReasoningContent: "The user greets me with <b> & \"quotes\"\nI reply.",
			},
			FinishReason: "stop",
			Usage:        Usage{CompletionTokens: 21, PromptTokens: 1200, TotalTokens: 1221, PromptTokensDetails: PromptTokensDetails{CachedTokens: 1100}},
			Timings: &Timings{CacheN: 1100, PromptN: 100, PromptMS: 180.5, PromptPerTokenMS: 1.805, PromptPerSecond: 554.016620498615,
				PredictedN: 21, PredictedMS: 250.125, PredictedPerTokenMS: 15.6328125, PredictedPerSecond: 63.968015992004},
			Progress:        PromptProgress{Total: 1200, Cache: 1100, Processed: 1200, TimeMS: 180},
			ReasoningTokens: 12,
		},
	},
	{
		file: "tool_call.sse",
		want: &Completion{
			ID: testID, Model: "ornith", SystemFingerprint: "b10587-3f545bec",
			Message: chat.Message{
				Role:             "assistant",
				Content:          "Reading both.",
				ReasoningContent: "Read the file.",
				ToolCalls: []chat.ToolCall{
					{ID: "k2PzR8vQ1mX4nB7cT0wY3jL6hF9dS5aE", Type: "function", Function: chat.FunctionCall{Name: "read_file", Arguments: `{"path": "/etc/hosts"}`}},
					{ID: "Zq8W1eR4tY7uI0oP3aS6dF9gH2jK5lXc", Type: "function", Function: chat.FunctionCall{Name: "grep", Arguments: `{"pattern": "<a href=\"x\">", "path": "."}`}},
				},
			},
			FinishReason: "tool_calls",
			Usage:        Usage{CompletionTokens: 30, PromptTokens: 800, TotalTokens: 830},
			Timings: &Timings{CacheN: 0, PromptN: 800, PromptMS: 180.5, PromptPerTokenMS: 1.805, PromptPerSecond: 554.016620498615,
				PredictedN: 30, PredictedMS: 250.125, PredictedPerTokenMS: 15.6328125, PredictedPerSecond: 63.968015992004},
			Progress:        PromptProgress{Total: 800, Cache: 0, Processed: 800, TimeMS: 900},
			ReasoningTokens: 4,
		},
	},
	{
		file: "pings_progress.sse",
		want: &Completion{
			ID: testID, Model: "ornith", SystemFingerprint: "b10587-3f545bec",
			Message:      chat.Message{Role: "assistant", Content: "pong"},
			FinishReason: "stop",
			Usage:        Usage{CompletionTokens: 1, PromptTokens: 9000, TotalTokens: 9001, PromptTokensDetails: PromptTokensDetails{CachedTokens: 8000}},
			Timings: &Timings{CacheN: 8000, PromptN: 1000, PromptMS: 180.5, PromptPerTokenMS: 1.805, PromptPerSecond: 554.016620498615,
				PredictedN: 1, PredictedMS: 250.125, PredictedPerTokenMS: 15.6328125, PredictedPerSecond: 63.968015992004},
			Progress: PromptProgress{Total: 9000, Cache: 8000, Processed: 9000, TimeMS: 1400},
		},
	},
	{
		file: "midstream_error.sse",
		err: func(err error) bool {
			var se *ServerError
			return errors.As(err, &se) && se.MidStream && se.Code == 500 && se.Type == "server_error" &&
				se.Message == "Unexpected error: failed to decode the batch"
		},
	},
	{
		file: "truncated.sse",
		err: func(err error) bool {
			var se *StreamError
			return errors.As(err, &se) && se.Kind == StreamTruncated && se.Event == 3
		},
	},
}

func checkParsed(t *testing.T, how string, got parsed, want *Completion, wantErr func(error) bool) {
	t.Helper()
	if wantErr != nil {
		if got.err == nil || !wantErr(got.err) {
			t.Fatalf("%s: err = %v, want the golden error", how, got.err)
		}
		return
	}
	if got.err != nil {
		t.Fatalf("%s: err = %v", how, got.err)
	}
	if !reflect.DeepEqual(got.comp, want) {
		t.Fatalf("%s:\n got %+v\nwant %+v", how, got.comp, want)
	}
}

func TestGoldenTranscripts(t *testing.T) {
	for _, tt := range goldenWants {
		t.Run(tt.file, func(t *testing.T) {
			data := readGolden(t, tt.file)
			readers := []struct {
				name string
				r    io.Reader
			}{
				{"one read", bytes.NewReader(data)},
				{"byte at a time", iotest.OneByteReader(bytes.NewReader(data))},
				{"half reads", iotest.HalfReader(bytes.NewReader(data))},
				{"odd chunks", &chunkReader{data: data, sizes: []int{7, 1, 300, 2, 61}}},
				{"crlf", bytes.NewReader(bytes.ReplaceAll(data, []byte("\n"), []byte("\r\n")))},
				{"crlf byte at a time", iotest.OneByteReader(bytes.NewReader(bytes.ReplaceAll(data, []byte("\n"), []byte("\r\n"))))},
				{"lone cr", iotest.OneByteReader(bytes.NewReader(bytes.ReplaceAll(data, []byte("\n"), []byte("\r"))))},
			}
			for _, rd := range readers {
				checkParsed(t, rd.name, parse(rd.r, DefaultMaxEventBytes, 0), tt.want, tt.err)
			}
		})
	}
}

// TestSplitEveryBoundary splits each transcript into two reads at every byte
// position: an event, a line ending or a UTF-8 sequence cut anywhere must
// give the same result as one read.
func TestSplitEveryBoundary(t *testing.T) {
	for _, tt := range goldenWants {
		data := readGolden(t, tt.file)
		whole := parse(bytes.NewReader(data), DefaultMaxEventBytes, 0)
		step := 1
		if testing.Short() {
			step = 17
		}
		for n := 1; n < len(data); n += step {
			got := parse(newSplitReader(data, n), DefaultMaxEventBytes, 0)
			if errString(got.err) != errString(whole.err) || !reflect.DeepEqual(got.comp, whole.comp) {
				t.Fatalf("%s split at %d: got %+v, %v; want %+v, %v", tt.file, n, got.comp, got.err, whole.comp, whole.err)
			}
		}
	}
}

func TestEvents(t *testing.T) {
	got := parse(bytes.NewReader(readGolden(t, "tool_call.sse")), DefaultMaxEventBytes, 0)
	if got.err != nil {
		t.Fatal(got.err)
	}
	var kinds []EventKind
	var text strings.Builder
	var names []string
	for _, ev := range got.events {
		kinds = append(kinds, ev.Kind)
		text.WriteString(ev.Text)
		if ev.ToolName != "" {
			names = append(names, ev.ToolName)
		}
	}
	wantKinds := []EventKind{EventProgress, EventProgress, EventReasoning, EventReasoning, EventReasoning, EventReasoning,
		EventContent, EventToolCall, EventToolCall, EventToolCall, EventToolCall, EventToolCall}
	if !reflect.DeepEqual(kinds, wantKinds) {
		t.Errorf("event kinds = %v, want %v", kinds, wantKinds)
	}
	wantText := `Read the file.Reading both.{"path": "/etc/hosts"}{"pattern": "<a href=\"x\">", "path": "."}`
	if text.String() != wantText {
		t.Errorf("event text = %q, want %q", text.String(), wantText)
	}
	if !reflect.DeepEqual(names, []string{"read_file", "grep"}) {
		t.Errorf("tool names = %v", names)
	}
}

// chunkLine builds one event with the test id around a JSON choices value.
func chunkLine(rest string) string {
	return `data: {"id":"` + testID + `","model":"m","object":"chat.completion.chunk",` + rest + "}\n\n"
}

func deltaLine(delta string) string {
	return chunkLine(`"choices":[{"index":0,"finish_reason":null,"delta":` + delta + `}]`)
}

var finishLine = chunkLine(`"choices":[{"index":0,"finish_reason":"stop","delta":{}}]`)

func TestInvalidStreams(t *testing.T) {
	first := deltaLine(`{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":"{"}}]}`)
	tests := []struct {
		name   string
		stream string
		kind   StreamErrorKind
		event  int
		msg    string
	}{
		{"index skips ahead", deltaLine(`{"tool_calls":[{"index":1,"id":"a","type":"function","function":{"name":"f","arguments":""}}]}`), StreamInvalid, 1, "skips ahead"},
		{"index skips ahead later", first + deltaLine(`{"tool_calls":[{"index":2,"function":{"arguments":"}"}}]}`), StreamInvalid, 2, "skips ahead"},
		{"second id", first + deltaLine(`{"tool_calls":[{"index":0,"id":"b","function":{"arguments":"}"}}]}`), StreamInvalid, 2, "second id"},
		{"second name", first + deltaLine(`{"tool_calls":[{"index":0,"function":{"name":"g","arguments":"}"}}]}`), StreamInvalid, 2, "second name"},
		{"goes back", first + deltaLine(`{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"g","arguments":""}}]}`) +
			deltaLine(`{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}`), StreamInvalid, 3, "goes back"},
		{"no index", deltaLine(`{"tool_calls":[{"id":"a","function":{"name":"f"}}]}`), StreamInvalid, 1, "without index"},
		{"first fragment without id", deltaLine(`{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{"}}]}`), StreamInvalid, 1, "without an id"},
		{"wrong type", deltaLine(`{"tool_calls":[{"index":0,"id":"a","type":"code","function":{"name":"f"}}]}`), StreamInvalid, 1, "want function"},
		{"other id", deltaLine(`{"content":"a"}`) + `data: {"id":"chatcmpl-other","choices":[]}` + "\n\n", StreamInvalid, 2, "differs"},
		{"no id", `data: {"choices":[]}` + "\n\n", StreamInvalid, 1, "no id"},
		{"two choices", chunkLine(`"choices":[{"index":0,"delta":{}},{"index":1,"delta":{}}]`), StreamInvalid, 1, "2 choices"},
		{"choice index", chunkLine(`"choices":[{"index":1,"delta":{"content":"x"}}]`), StreamInvalid, 1, "choice index 1"},
		{"role", deltaLine(`{"role":"user"}`), StreamInvalid, 1, "delta role"},
		{"content after finish", finishLine + deltaLine(`{"content":"x"}`), StreamInvalid, 2, "after finish"},
		{"second finish", finishLine + finishLine, StreamInvalid, 2, "second finish"},
		{"done before finish", deltaLine(`{"content":"x"}`) + "data: [DONE]\n\n", StreamInvalid, 2, "before a finish"},
		{"not json", "data: {nope\n\n", StreamInvalid, 1, "decode chunk"},
		{"not an object", "data: [1,2]\n\n", StreamInvalid, 1, "decode chunk"},
		{"null", "data: null\n\n", StreamInvalid, 1, "no id"},
		{"error not an object", `data: {"error":"boom"}` + "\n\n", StreamInvalid, 1, "decode chunk"},
		{"huge line", "data: " + strings.Repeat("x", 5000) + "\n\n", StreamTooLarge, 1, "exceeds 4096"},
		{"huge unterminated line", deltaLine(`{"content":"x"}`) + ": " + strings.Repeat("x", 5000), StreamTooLarge, 2, "exceeds 4096"},
		{"huge multi-line event", strings.Repeat("data: "+strings.Repeat("x", 1000)+"\n", 5) + "\n", StreamTooLarge, 1, "exceeds 4096"},
		{"empty", "", StreamTruncated, 0, "without [DONE]"},
		{"only pings", ":\n\n:\n\n", StreamTruncated, 0, "without [DONE]"},
		{"unterminated done", finishLine + "data: [DONE]\n", StreamTruncated, 1, "without [DONE]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, oneByte := range []bool{false, true} {
				var r io.Reader = strings.NewReader(tt.stream)
				if oneByte {
					r = iotest.OneByteReader(r)
				}
				got := parse(r, 4096, 0)
				var se *StreamError
				if !errors.As(got.err, &se) || se.Kind != tt.kind || se.Event != tt.event || !strings.Contains(se.Msg, tt.msg) {
					t.Fatalf("parse(oneByte=%v) err = %v, want %v at event %d containing %q", oneByte, got.err, tt.kind, tt.event, tt.msg)
				}
				if !strings.HasPrefix(se.Error(), "chat completion: ") {
					t.Errorf("error %q does not start with the operation", se.Error())
				}
			}
		})
	}
}

func TestLenientStreams(t *testing.T) {
	tests := []struct {
		name    string
		stream  string
		content string
		calls   int
	}{
		{"unknown fields and null finish", chunkLine(`"x":{"y":[1]},"choices":[{"index":0,"finish_reason":null,"logprobs":null,"delta":{"content":"a","z":1}}]`) + finishLine, "a", 0},
		{"role twice", deltaLine(`{"role":"assistant","content":null}`) + deltaLine(`{"role":"assistant","content":null}`) + deltaLine(`{"content":"b"}`) + finishLine, "b", 0},
		{"same id repeated", deltaLine(`{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":"{"}}]}`) +
			deltaLine(`{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":"}"}}]}`) + finishLine, "", 1},
		{"data without space", `data:{"id":"` + testID + `","choices":[{"index":0,"delta":{"content":"c"},"finish_reason":"stop"}]}` + "\n\n", "c", 0},
		{"events after done ignored", finishLine + "data: [DONE]\n\ndata: garbage\n\n", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.stream
			if !strings.Contains(s, "[DONE]") {
				s += "data: [DONE]\n\n"
			}
			got := parse(strings.NewReader(s), 4096, 0)
			if got.err != nil {
				t.Fatalf("parse: %v", got.err)
			}
			if got.comp.Message.Content != tt.content || len(got.comp.Message.ToolCalls) != tt.calls {
				t.Fatalf("content %q calls %d, want %q %d", got.comp.Message.Content, len(got.comp.Message.ToolCalls), tt.content, tt.calls)
			}
		})
	}
}

// TestReplayExact is the replay invariant: the assistant message a stream
// produced marshals into the next request with every string intact and
// without HTML escaping.
func TestReplayExact(t *testing.T) {
	c, err := New(Config{BaseURL: "http://127.0.0.1:1", Model: "ornith"})
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"reasoning_content.sse", "tool_call.sse"} {
		got := parse(bytes.NewReader(readGolden(t, file)), DefaultMaxEventBytes, 0)
		if got.err != nil {
			t.Fatal(got.err)
		}
		body, err := c.fullBody(Request{Messages: []chat.Message{{Role: chat.RoleUser, Content: "hi"}, got.comp.Message}})
		if err != nil {
			t.Fatal(err)
		}
		for _, escaped := range []string{`\u003c`, `\u003e`, `\u0026`} {
			if bytes.Contains(body, []byte(escaped)) {
				t.Errorf("%s: body contains HTML escape %s", file, escaped)
			}
		}
		var back chatRequest
		if err := jsonUnmarshalStrict(body, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back.Messages[1], got.comp.Message) {
			t.Errorf("%s: replayed message changed:\n got %+v\nwant %+v", file, back.Messages[1], got.comp.Message)
		}
	}
}

// TestCapCallback: the accumulator signals the thinking cap exactly once,
// when the count of reasoning deltas reaches it, with the stream's id.
func TestCapCallback(t *testing.T) {
	data := readGolden(t, "reasoning_content.sse")
	for _, tt := range []struct{ capAt, calls int }{{0, 0}, {1, 1}, {5, 1}, {12, 1}, {13, 0}} {
		got := parse(bytes.NewReader(data), DefaultMaxEventBytes, tt.capAt)
		if got.err != nil || len(got.capIDs) != tt.calls || got.comp.CapFired != (tt.calls == 1) {
			t.Fatalf("cap %d: %d calls (fired %v), err %v; want %d", tt.capAt, len(got.capIDs), got.comp.CapFired, got.err, tt.calls)
		}
		if tt.calls == 1 && got.capIDs[0] != testID {
			t.Fatalf("cap %d: id %q", tt.capAt, got.capIDs[0])
		}
		// The callback comes right after the delta that reaches the cap.
		if tt.calls == 1 && got.capAfter[0] != tt.capAt {
			t.Fatalf("cap %d: callback after %d reasoning deltas", tt.capAt, got.capAfter[0])
		}
	}
}
