// Package consult is the consult tool's exchange with a remote
// OpenAI-compatible model: the one function that builds the request body
// ([Body]) and the one that carries it and reads the streamed answer
// ([Exchange]). brokerd builds and logs the body; the toolkit, in the
// call's container, sends those bytes unchanged and reads the answer.
//
// # Invariants
//
//   - [Body] is a pure function of the model's name, the temperature and
//     consult's two arguments (package toolargs' [toolargs.Consult]) plus
//     the fixed [System] text: nothing of a session, its memory, its
//     identity or its tool results can reach it, because none is a
//     parameter. The body always sets "stream": true and a temperature of
//     at most [MaxTemperatureMilli]/1000, and never has a "tools" key.
//   - [Exchange] sends exactly the body it is given, once (no retry, no
//     failover), and bounds the wait two ways: a liveness limit (no byte
//     of the response for IdleMS fails the call) and a total bound
//     (TotalMS for the whole exchange), so a stalled or a never-ending
//     stream is a clear error, never a hang.
//   - The answer's reasoning is kept apart from its content ([Answer]):
//     the local model is shown the content only.
//   - Everything read from the remote server is capped before it is
//     kept ([MaxContent], [MaxReasoning], [MaxLine]).
//
// The wire is OpenAI's chat completions, streamed
// (https://platform.openai.com/docs/api-reference/chat/create), as
// llama-server speaks it (ggml-org/llama.cpp tools/server at commit
// 3f545bec: server-common.cpp:1584-1601 format_oai_sse, server-context.cpp
// handle_completions_impl): POST {base}/chat/completions,
// an event stream of "data: <json>" events ending with "data: [DONE]",
// ":" comment pings, and an error as "data: {"error":{...}}". Nothing here
// is specific to one vendor.
package consult

import (
	"encoding/json"
	"fmt"
	"strconv"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
)

// System is the fixed system text of every consult. It tells the remote
// model what it is given (one self-contained question) and what it is
// not (tools, a conversation).
const System = "You are consulted by a local assistant for a second opinion. " +
	"You receive one self-contained question, and sometimes context the assistant chose to include; " +
	"you have no tools and no conversation history. Answer in plain text, concisely, " +
	"and say when the question lacks what you would need to answer it."

// MaxTemperatureMilli is the highest temperature a consult may ask for,
// in thousandths (0.6): hosted reasoning models make malformed output at
// their default of 1.0 (the brief's Cloud consult section).
const MaxTemperatureMilli = 600

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// body is the request, in its key order. There is deliberately no tools
// field: the remote model is given none.
type body struct {
	Model       string      `json:"model"`
	Messages    []message   `json:"messages"`
	Temperature json.Number `json:"temperature"`
	Stream      bool        `json:"stream"`
}

// Body builds the request body of a consult. temperatureMilli is in
// thousandths, 0 to [MaxTemperatureMilli].
func Body(model string, temperatureMilli int, a toolargs.Consult) ([]byte, error) {
	if model == "" {
		return nil, fmt.Errorf("build consult body: no model")
	}
	if temperatureMilli < 0 || temperatureMilli > MaxTemperatureMilli {
		return nil, fmt.Errorf("build consult body: temperature %d/1000 is outside 0 to %d/1000", temperatureMilli, MaxTemperatureMilli)
	}
	user := a.Question
	if a.Context != "" {
		user += "\n\n--- context supplied by the assistant ---\n" + a.Context
	}
	b := body{Model: model, Messages: []message{{"system", System}, {"user", user}},
		Temperature: json.Number(milli(temperatureMilli)), Stream: true}
	return strict.Marshal(b)
}

// milli writes n/1000 as a short decimal: 600 is 0.6, 0 is 0, 55 is 0.055.
func milli(n int) string {
	if n%1000 == 0 {
		return strconv.Itoa(n / 1000)
	}
	s := strconv.FormatFloat(float64(n)/1000, 'f', -1, 64)
	return s
}
