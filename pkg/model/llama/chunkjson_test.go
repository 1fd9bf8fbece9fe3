package llama

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// goldenEvents returns every chunk event of the golden transcripts and of
// the benchmark's reply.
func goldenEvents(t testing.TB) [][]byte {
	var evs [][]byte
	for _, file := range []string{"reasoning_content.sse", "tool_call.sse", "pings_progress.sse", "midstream_error.sse", "truncated.sse"} {
		d := newSSEDecoder(bytes.NewReader(readGolden(t, file)), DefaultMaxEventBytes)
		for {
			ev, err := d.next()
			if err != nil {
				break
			}
			evs = append(evs, bytes.Clone(ev))
		}
	}
	d := newSSEDecoder(bytes.NewReader(cannedReply()), DefaultMaxEventBytes)
	for {
		ev, err := d.next()
		if err != nil {
			break
		}
		evs = append(evs, bytes.Clone(ev))
	}
	return evs
}

// checkChunk is the decoder's property: when decodeChunk succeeds, the
// chunk is what json.Unmarshal makes of the same bytes, and json.Unmarshal
// succeeds too.
func checkChunk(t *testing.T, data []byte) bool {
	t.Helper()
	var fast chunk
	if !decodeChunk(data, &fast, "chatcmpl-Q3x9Kf2LmN8pR4tV7wY1zA5bC6dE0gH2", "ornith", "b10587-3f545bec") {
		return false
	}
	var ref chunk
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatalf("decodeChunk accepted %q, json.Unmarshal refused it: %v", data, err)
	}
	if !reflect.DeepEqual(fast, ref) {
		t.Fatalf("decodeChunk(%q) =\n%+v\njson.Unmarshal =\n%+v", data, fast, ref)
	}
	return true
}

// TestChunkDecodeFastPath: every chunk the server sends in the golden
// transcripts takes the fast path (so the benchmark measures it) and
// decodes as encoding/json decodes it; only the error events do not.
func TestChunkDecodeFastPath(t *testing.T) {
	evs := goldenEvents(t)
	fast := 0
	for _, ev := range evs {
		if string(ev) == "[DONE]" {
			continue
		}
		ok := checkChunk(t, ev)
		isError := bytes.HasPrefix(ev, []byte(`{"error"`))
		if ok == isError {
			t.Errorf("decodeChunk(%q) = %v", ev, ok)
		}
		if ok {
			fast++
		}
	}
	if fast < 400 {
		t.Fatalf("only %d chunks took the fast path", fast)
	}
}

// chunkCases are inputs at the edges of what the fast path decodes.
var chunkCases = []struct {
	name string
	data string
	fast bool // decodeChunk must succeed (and agree with encoding/json)
}{
	{"escapes", `{"id":"a","choices":[{"index":0,"delta":{"content":"line\n\"q\" \u00e9 \u2028 \ud83d\ude00 \/"}}]}`, true},
	{"lone surrogate", `{"id":"a","choices":[{"delta":{"content":"\ud800x"}}]}`, true},
	{"invalid utf-8", "{\"id\":\"a\",\"choices\":[{\"delta\":{\"content\":\"\xff\xfe ok\"}}]}", true},
	{"multi-byte", `{"id":"漢字","choices":[{"delta":{"reasoning_content":"é"}}]}`, true},
	{"nulls", `{"id":null,"model":null,"choices":null,"usage":null,"timings":null,"prompt_progress":null}`, true},
	{"null delta parts", `{"id":"a","choices":[{"index":null,"finish_reason":null,"delta":{"role":null,"content":null,"tool_calls":null}}]}`, true},
	{"null delta", `{"id":"a","choices":[{"delta":null}]}`, true},
	{"empty arrays", `{"id":"a","choices":[{"delta":{"tool_calls":[]}}]}`, true},
	{"empty choices", `{"id":"a","choices":[]}`, true},
	{"white space", " \t\r\n{ \"id\" : \"a\" , \"choices\" : [ { \"index\" : 0 } ] } \n", true},
	{"unknown nested", `{"id":"a","x":{"y":[1,-2.5e3,true,false,null,"s\"\\\u0041",{"z":{}}]},"object":"chat.completion.chunk","created":1766000000}`, true},
	{"tool call null parts", `{"id":"a","choices":[{"delta":{"tool_calls":[{"index":null,"id":null,"function":null}]}}]}`, true},
	{"timings null rates", `{"id":"a","choices":[],"timings":{"cache_n":1,"prompt_n":2,"prompt_ms":3.5,"prompt_per_token_ms":null,"prompt_per_second":1e2,"predicted_n":-0,"predicted_ms":0.0,"predicted_per_token_ms":1E-3,"predicted_per_second":12345678901234567890.5,"draft_n":0,"draft_n_accepted":0}}`, true},
	{"usage details", `{"id":"a","choices":[],"usage":{"completion_tokens":1,"prompt_tokens":2,"total_tokens":3,"prompt_tokens_details":{"cached_tokens":4,"other":5}}}`, true},
	{"usage null details", `{"id":"a","usage":{"prompt_tokens_details":null}}`, true},
	{"progress", `{"id":"a","prompt_progress":{"total":1,"cache":2,"processed":3,"time_ms":-4}}`, true},
	{"empty object", `{}`, true},

	{"folded key", `{"ID":"a"}`, false},
	{"folded nested key", `{"id":"a","choices":[{"Delta":{"content":"x"}}]}`, false},
	{"kelvin sign key", "{\"id\":\"a\",\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"x\"}}]}}],\"\u212aey\":1}", false},
	{"escaped key", `{"i\u0064":"a"}`, false},
	{"repeated key", `{"id":"a","id":"b"}`, false},
	{"repeated choices", `{"id":"a","choices":[{"delta":{"content":"x"}}],"choices":[{"index":0}]}`, false},
	{"error event", `{"error":{"code":500,"message":"m","type":"server_error"}}`, false},
	{"string as number", `{"id":1}`, false},
	{"int with fraction", `{"id":"a","choices":[{"index":0.0}]}`, false},
	{"int with exponent", `{"id":"a","choices":[{"index":1e0}]}`, false},
	{"huge int", `{"id":"a","choices":[{"index":1234567890123456789012}]}`, false},
	{"float out of range", `{"id":"a","timings":{"prompt_ms":1e400}}`, false},
	{"leading zero", `{"id":"a","choices":[{"index":01}]}`, false},
	{"trailing data", `{"id":"a"}x`, false},
	{"two values", `{"id":"a"}{"id":"b"}`, false},
	{"top level null", `null`, false},
	{"null choice", `{"id":"a","choices":[null]}`, false},
	{"control character", "{\"id\":\"a\x01\"}", false},
	{"bad escape", `{"id":"a","x":"\q"}`, false},
	{"short unicode escape", `{"id":"a","x":"\u12"}`, false},
	{"unterminated", `{"id":"a"`, false},
	{"trailing comma", `{"id":"a",}`, false},
	{"deep", `{"id":"a","x":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`, false},
}

func TestChunkDecodeCases(t *testing.T) {
	for _, tt := range chunkCases {
		t.Run(tt.name, func(t *testing.T) {
			if got := checkChunk(t, []byte(tt.data)); got != tt.fast {
				t.Fatalf("decodeChunk(%q) = %v, want %v", tt.data, got, tt.fast)
			}
		})
	}
}

// FuzzChunkDecode checks the decoder's property on arbitrary bytes: it may
// give up on anything, but what it accepts, encoding/json accepts and
// decodes to the same chunk.
func FuzzChunkDecode(f *testing.F) {
	for _, tt := range chunkCases {
		f.Add([]byte(tt.data))
	}
	for _, ev := range goldenEvents(f)[:12] {
		f.Add(ev)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkChunk(t, data)
	})
}
