package llama

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// The rendering below is a Go port of data/qwen3.5-keep-thinking.jinja, the
// deployed model's template: upstream Qwen3.5 with every thinking block
// kept (reference, "A real llama-server for conformance tests"). Each
// string literal is copied from that template. llama-server renders it with
// add_generation_prompt and hands the text to the tokenizer with special
// tokens parsed.

// toolsPreamble and toolsInstructions frame the tools array that the
// template renders at the very top of the prompt.
const (
	toolsPreamble     = "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>"
	toolsInstructions = "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n- Required parameters MUST be specified\n- You may provide optional reasoning for your function call in natural language BEFORE the function call, but NOT after\n- If there is no function call available, answer the question like normal with your current knowledge and do not tell the user about function calls\n</IMPORTANT>"
)

// assistantHeader is the generation prompt with thinking on; the model's
// output continues right after it. With thinking off the template closes
// the block itself (thinkingOffHeader).
const (
	assistantHeader   = "<|im_start|>assistant\n<think>\n"
	thinkingOffHeader = "<|im_start|>assistant\n<think>\n\n</think>\n\n"
	thinkClose        = "\n</think>\n\n"
)

// templateError is a raise_exception from the template. llama-server turns
// it into a std::runtime_error, which comes back as a 500 (server.cpp:54-85).
type templateError string

func (e templateError) Error() string { return string(e) }

// chatMessage is one element of "messages". Unknown keys are ignored, as the
// template ignores them.
type chatMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ReasoningContent json.RawMessage `json:"reasoning_content"`
	ToolCalls        []msgToolCall   `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
}

// msgToolCall accepts both the OpenAI shape {"function":{...}} and a bare
// {"name","arguments"}, as the template does ("if tool_call.function is
// defined").
type msgToolCall struct {
	Function  *msgFunction    `json:"function"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type msgFunction struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// kv is one argument of a tool call, in the order the client sent it:
// nlohmann::ordered_json keeps object order (server-common.h: using json =
// nlohmann::ordered_json), so the template's |items does too.
type kv struct {
	key   string
	value json.RawMessage
}

// renderCall is a tool call ready for the template.
type renderCall struct {
	name string
	args []kv
}

// renderPrompt renders tools and messages followed by the generation prompt.
//
// With dropEarlier the render is that of the upstream template
// (data/qwen3.5-chat-template.jinja, line 100) instead: an assistant message
// at or before the last user query loses its thinking block, so a new user
// turn is not an extension of the previous request.
func renderPrompt(tools []json.RawMessage, msgs []chatMessage, thinking, dropEarlier bool) (string, error) {
	if len(msgs) == 0 {
		return "", templateError("No messages provided.")
	}
	var b strings.Builder
	first, err := contentText(msgs[0].Content)
	if err != nil {
		return "", err
	}
	if len(tools) > 0 {
		b.WriteString(toolsPreamble)
		for _, t := range tools {
			// Reference silent on tojson's spacing; the fake writes each
			// tool compactly, in the order the client sent its keys.
			var c bytes.Buffer
			if err := json.Compact(&c, t); err != nil {
				return "", fmt.Errorf("compact tool: %v", err)
			}
			b.WriteString("\n")
			b.Write(c.Bytes())
		}
		b.WriteString(toolsInstructions)
		if msgs[0].Role == "system" {
			if c := strings.TrimSpace(first); c != "" {
				b.WriteString("\n\n" + c)
			}
		}
		b.WriteString("<|im_end|>\n")
	} else if msgs[0].Role == "system" {
		b.WriteString("<|im_start|>system\n" + strings.TrimSpace(first) + "<|im_end|>\n")
	}

	lastQuery, err := checkUserQuery(msgs)
	if err != nil {
		return "", err
	}
	for i, m := range msgs {
		content, err := contentText(m.Content)
		if err != nil {
			return "", err
		}
		content = strings.TrimSpace(content)
		switch m.Role {
		case "system":
			if i != 0 {
				return "", templateError("System message must be at the beginning.")
			}
		case "user":
			b.WriteString("<|im_start|>user\n" + content + "<|im_end|>\n")
		case "assistant":
			reasoning, content := splitReasoning(m.ReasoningContent, content)
			calls, err := messageCalls(m.ToolCalls)
			if err != nil {
				return "", err
			}
			if dropEarlier && i <= lastQuery {
				// Template line 100: '<|im_start|>assistant\n' + content.
				b.WriteString("<|im_start|>assistant\n" + assistantCalls(content, calls) + eosPiece + "\n")
				break
			}
			b.WriteString(assistantHeader + assistantBody(reasoning, content, calls) + eosPiece + "\n")
		case "tool":
			if i > 0 && msgs[i-1].Role != "tool" {
				b.WriteString("<|im_start|>user")
			}
			b.WriteString("\n<tool_response>\n")
			// The fake's one departure from the template: the real one
			// ignores tool_call_id. The fake renders it so that a client
			// which rewrites a replayed tool_call_id loses its prefix here,
			// which the brief's append-only rule forbids anyway.
			if m.ToolCallID != "" {
				b.WriteString("tool_call_id: " + m.ToolCallID + "\n")
			}
			b.WriteString(content + "\n</tool_response>")
			if i == len(msgs)-1 || msgs[i+1].Role != "tool" {
				b.WriteString("<|im_end|>\n")
			}
		default:
			return "", templateError("Unexpected message role.")
		}
	}
	if thinking {
		b.WriteString(assistantHeader)
	} else {
		b.WriteString(thinkingOffHeader)
	}
	return b.String(), nil
}

// checkUserQuery copies the template's multi_step_tool scan: some user
// message must not be a bare <tool_response> block. It returns the index of
// the last such message (the template's last_query_index).
func checkUserQuery(msgs []chatMessage) (int, error) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		c, err := contentText(msgs[i].Content)
		if err != nil {
			return 0, err
		}
		c = strings.TrimSpace(c)
		if !strings.HasPrefix(c, "<tool_response>") || !strings.HasSuffix(c, "</tool_response>") {
			return i, nil
		}
	}
	return 0, templateError("No user query found in messages.")
}

// assistantBody is what the template renders between the generation prompt
// and <|im_end|>. The fake's model generates exactly this text, which is why
// a returned message, replayed unchanged, extends the cached sequence.
func assistantBody(reasoning, content string, calls []renderCall) string {
	return reasoning + thinkClose + assistantCalls(content, calls)
}

// assistantCalls is the content and tool calls of an assistant message.
func assistantCalls(content string, calls []renderCall) string {
	var b strings.Builder
	b.WriteString(content)
	for i, c := range calls {
		b.WriteString(callXML(i, content, c))
	}
	return b.String()
}

// callXML renders one tool call in the Qwen XML form that the Qwen3-Coder
// parser reads (common/chat.cpp:1234-1300).
func callXML(i int, content string, c renderCall) string {
	var b strings.Builder
	switch {
	case i > 0:
		b.WriteString("\n<tool_call>\n<function=")
	case strings.TrimSpace(content) != "":
		b.WriteString("\n\n<tool_call>\n<function=")
	default:
		b.WriteString("<tool_call>\n<function=")
	}
	b.WriteString(c.name + ">\n")
	for _, a := range c.args {
		b.WriteString("<parameter=" + a.key + ">\n" + argText(a.value) + "\n</parameter>\n")
	}
	b.WriteString("</function>\n</tool_call>")
	return b.String()
}

// argText renders a parameter value: strings as they are, objects and
// arrays as JSON. Reference silent on how minja prints other scalars with
// |string; the fake writes their JSON text (true, 1.5, null).
func argText(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var c bytes.Buffer
	if json.Compact(&c, v) != nil {
		return string(v)
	}
	return c.String()
}

// splitReasoning copies the template: reasoning_content when it is a string,
// otherwise whatever sits between <think> and </think> in the content; both
// trimmed.
func splitReasoning(rc json.RawMessage, content string) (reasoning, rest string) {
	var s string
	if json.Unmarshal(rc, &s) == nil {
		return strings.TrimSpace(s), content
	}
	if !strings.Contains(content, "</think>") {
		return "", content
	}
	before := strings.TrimRight(strings.SplitN(content, "</think>", 2)[0], "\n")
	parts := strings.Split(before, "<think>")
	reasoning = strings.TrimLeft(parts[len(parts)-1], "\n")
	all := strings.Split(content, "</think>")
	return strings.TrimSpace(reasoning), strings.TrimLeft(all[len(all)-1], "\n")
}

// messageCalls turns replayed tool calls into template input. OpenAI
// clients send arguments as a JSON string; llama-server parses it into an
// object before rendering, since the template iterates over its items.
func messageCalls(tcs []msgToolCall) ([]renderCall, error) {
	var out []renderCall
	for _, tc := range tcs {
		name, raw := tc.Name, tc.Arguments
		if tc.Function != nil {
			name, raw = tc.Function.Name, tc.Function.Arguments
		}
		var text string
		if json.Unmarshal(raw, &text) == nil {
			raw = json.RawMessage(text)
		}
		args, err := orderedObject(raw)
		if err != nil {
			return nil, fmt.Errorf("tool call %q arguments: %v", name, err)
		}
		out = append(out, renderCall{name: name, args: args})
	}
	return out, nil
}

// orderedObject decodes a JSON object keeping its key order. Empty input is
// an empty object.
func orderedObject(data []byte) ([]kv, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	var out []kv
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, kv{key: key, value: v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("trailing data after object")
	}
	return out, nil
}

// contentText copies the template's render_content: a string, null or
// absent (empty), or an array of text parts. Media parts need a multimodal
// projector the fake does not have; reference silent, the fake refuses
// them as the template refuses unknown items.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", templateError("Unexpected content type.")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "image_url" && p.ImageURL != nil {
			// Checked by checkMedia before rendering (media.go).
			b.WriteString(mediaText(p.ImageURL.URL))
			continue
		}
		if p.Text == nil {
			return "", templateError("Unexpected item type in content.")
		}
		b.WriteString(*p.Text)
	}
	return b.String(), nil
}

// RenderPrompt renders the prompt the fake builds for a chat-completions
// request body, so tests can predict token counts with [Tokenize].
func RenderPrompt(body []byte) (string, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return "", fmt.Errorf("parse body: %v", err)
	}
	req, apiErr := parseChat(fields)
	if apiErr != nil {
		return "", fmt.Errorf("parse request: %s", apiErr.Message)
	}
	return renderPrompt(req.tools, req.messages, req.thinking, false)
}
