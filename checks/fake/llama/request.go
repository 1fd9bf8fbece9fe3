package llama

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// maxBody caps a request body. Reference silent; 64 MiB is far above any
// prompt that fits a slot and keeps a runaway test from eating memory.
const maxBody = 64 << 20

// Error is llama-server's error object, {"code","message","type"}
// (server-common.cpp:19-60). Tests use it to script a mid-stream error.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Type    string `json:"type"`
}

// apiError is an HTTP error answer. The overflow error adds two fields after
// the usual three (server-task.cpp:1501-1508).
type apiError struct {
	Code          int    `json:"code"`
	Message       string `json:"message"`
	Type          string `json:"type"`
	NPromptTokens *int   `json:"n_prompt_tokens,omitempty"`
	NCtx          *int   `json:"n_ctx,omitempty"`
}

// Error types and their HTTP codes (server-common.cpp:19-60).
func errInvalid(msg string) *apiError {
	return &apiError{Code: 400, Message: msg, Type: "invalid_request_error"}
}

func errServer(msg string) *apiError {
	return &apiError{Code: 500, Message: msg, Type: "server_error"}
}

func errNotSupported(msg string) *apiError {
	return &apiError{Code: 501, Message: msg, Type: "not_supported_error"}
}

func errUnavailable(msg string) *apiError {
	return &apiError{Code: 503, Message: msg, Type: "unavailable_error"}
}

// errExceedContext copies the overflow answer: 400, its own type, and the
// two counts (server-context.cpp:3069-3087, server-task.cpp:1501-1508).
func errExceedContext(nPrompt, nCtx int) *apiError {
	return &apiError{
		Code:          400,
		Message:       fmt.Sprintf("request (%d tokens) exceeds the available context size (%d tokens), try increasing it", nPrompt, nCtx),
		Type:          "exceed_context_size_error",
		NPromptTokens: &nPrompt,
		NCtx:          &nCtx,
	}
}

func writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.Code, struct {
		Error *apiError `json:"error"`
	}{e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(marshal(v))
}

// marshal encodes like nlohmann's dump: no HTML escaping of <, > and &,
// which Go's encoder would otherwise turn into \u003c in every <think>.
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only the fake's own types reach here.
		panic(fmt.Sprintf("llama fake: marshal %T: %v", v, err))
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// readBody reads a JSON object body. Reference silent on a body that is not
// JSON; the fake answers 400 invalid_request_error.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, map[string]json.RawMessage, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		return nil, nil, false
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		writeError(w, errInvalid("request body must be a JSON object"))
		return nil, nil, false
	}
	return body, fields, true
}

// present reports whether key holds a value. A JSON null means "use the
// server default" (server-schema.cpp:582-584).
func present(f map[string]json.RawMessage, key string) bool {
	v, ok := f[key]
	return ok && string(v) != "null"
}

// jsonBool, jsonInt and jsonString read an optional field. A value of the
// wrong type falls back to the default, as json_value does after logging a
// warning (server-common.h:40-52).
func jsonBool(f map[string]json.RawMessage, key string, def bool) bool {
	var v bool
	if !present(f, key) || json.Unmarshal(f[key], &v) != nil {
		return def
	}
	return v
}

func jsonInt(f map[string]json.RawMessage, key string, def int) int {
	var v int
	if !present(f, key) || json.Unmarshal(f[key], &v) != nil {
		return def
	}
	return v
}

func jsonString(f map[string]json.RawMessage, key string, def string) string {
	var v string
	if !present(f, key) || json.Unmarshal(f[key], &v) != nil {
		return def
	}
	return v
}

func jsonFloat(f map[string]json.RawMessage, key string, def float64) float64 {
	var v float64
	if !present(f, key) || json.Unmarshal(f[key], &v) != nil {
		return def
	}
	return v
}

// chatRequest is what the fake honours of a chat-completions body.
type chatRequest struct {
	messages        []chatMessage
	tools           []json.RawMessage
	stream          bool
	includeUsage    bool
	returnProgress  bool
	timingsPerToken bool
	idSlot          int
	nPredict        int
	control         bool
	budgetTokens    int
	budgetMessage   string
	thinking        bool
	ping            time.Duration
	pingSet         bool
	params          samplingParams
}

// samplingParams is the part of a task's params the fake reports in /props
// and /slots. Reference silent on the defaults: the fake uses llama.cpp's
// common_params_sampling defaults as recalled (unverified), and does not
// clamp (server-schema.cpp:89-119 clamps; the fake records what was sent).
type samplingParams struct {
	NPredict    int     `json:"n_predict"`
	Temperature float64 `json:"temperature"`
	TopK        int     `json:"top_k"`
	TopP        float64 `json:"top_p"`
	MinP        float64 `json:"min_p"`
}

var defaultSampling = samplingParams{NPredict: -1, Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05}

// parseChat reads the fields oaicompat_chat_params_parse and the schema
// honour (server-common.cpp:1128-1396, server-schema.cpp).
func parseChat(f map[string]json.RawMessage) (*chatRequest, *apiError) {
	req := &chatRequest{idSlot: -1, nPredict: -1, budgetTokens: -1, thinking: true}
	if err := json.Unmarshal(f["messages"], &req.messages); err != nil || !present(f, "messages") {
		// Reference silent on the message; the fake answers 400.
		return nil, errInvalid("'messages' is required and must be an array of messages")
	}
	// tools: an OpenAI-style array (server-common.cpp:1134-1144).
	if present(f, "tools") {
		if err := json.Unmarshal(f["tools"], &req.tools); err != nil {
			return nil, errInvalid("'tools' must be an array")
		}
	}
	// tool_choice: only "auto", "none" and "required"; an object is treated
	// as "auto" by json_value; any other string is a 400
	// (server-common.cpp:1138, common/chat.cpp:344-355). Reference silent
	// on the message text.
	var choice string
	if present(f, "tool_choice") && json.Unmarshal(f["tool_choice"], &choice) == nil {
		switch choice {
		case "auto", "none", "required":
		default:
			return nil, errInvalid("Invalid tool_choice: " + choice)
		}
	}
	// reasoning_format: other values throw runtime_error, a 500
	// (server-common.cpp:1283-1286, common/chat.cpp:885-899). Reference
	// silent on the message text.
	if rf := jsonString(f, "reasoning_format", "auto"); rf != "none" && rf != "auto" && rf != "deepseek" && rf != "deepseek-legacy" {
		return nil, errServer("Unknown reasoning format: " + rf)
	}
	// chat_template_kwargs.enable_thinking must be a JSON bool
	// (server-common.cpp:1296-1310). Reference silent on the status; the
	// fake answers 400.
	if present(f, "chat_template_kwargs") {
		var kw map[string]json.RawMessage
		if json.Unmarshal(f["chat_template_kwargs"], &kw) == nil && present(kw, "enable_thinking") {
			var on bool
			if json.Unmarshal(kw["enable_thinking"], &on) != nil {
				return nil, errInvalid("\"enable_thinking\" must be a boolean")
			}
			req.thinking = on
		}
	}
	// reasoning_effort "none" turns thinking off (server-common.cpp:1312-1321).
	if jsonString(f, "reasoning_effort", "") == "none" {
		req.thinking = false
	}

	req.stream = jsonBool(f, "stream", false)
	// stream_options.include_usage (server-schema.cpp:26-29).
	if present(f, "stream_options") {
		var so map[string]json.RawMessage
		if json.Unmarshal(f["stream_options"], &so) == nil {
			req.includeUsage = jsonBool(so, "include_usage", false)
		}
	}
	req.returnProgress = jsonBool(f, "return_progress", false)    // server-schema.cpp:37
	req.timingsPerToken = jsonBool(f, "timings_per_token", false) // server-schema.cpp:20
	req.idSlot = jsonInt(f, "id_slot", -1)                        // server-context.cpp:4184
	// max_tokens, max_completion_tokens and n_predict are aliases, -1 is
	// unlimited (server-schema.cpp:44-48). Reference silent on precedence
	// when several are sent: the fake takes the first of n_predict,
	// max_completion_tokens, max_tokens.
	for _, k := range []string{"n_predict", "max_completion_tokens", "max_tokens"} {
		if present(f, k) {
			req.nPredict = jsonInt(f, k, -1)
			break
		}
	}
	// reasoning_control arms the control endpoint; the budget fields are
	// its per-request alternative (server-common.cpp:1351-1367).
	req.control = jsonBool(f, "reasoning_control", false)
	req.budgetTokens = jsonInt(f, "reasoning_budget_tokens", jsonInt(f, "thinking_budget_tokens", -1))
	req.budgetMessage = jsonString(f, "reasoning_budget_message", "")
	// sse_ping_interval in seconds, -1 disables pings (server-schema.cpp:40).
	// Reference silent on 0; the fake treats any value <= 0 as disabled.
	if present(f, "sse_ping_interval") {
		req.pingSet = true
		if sec := jsonInt(f, "sse_ping_interval", -1); sec > 0 {
			req.ping = time.Duration(sec) * time.Second
		}
	}
	req.params = samplingParams{
		NPredict:    req.nPredict,
		Temperature: jsonFloat(f, "temperature", defaultSampling.Temperature),
		TopK:        jsonInt(f, "top_k", defaultSampling.TopK),
		TopP:        jsonFloat(f, "top_p", defaultSampling.TopP),
		MinP:        jsonFloat(f, "min_p", defaultSampling.MinP),
	}
	return req, nil
}
