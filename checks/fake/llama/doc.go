// Package llama is a test double of llama-server, used by the tests of
// everything that talks to the model: the inference client and its
// conformance suite (pkg/model/llama), the self-test, loopd's turn and session
// tests, bxctl's, and the multi-role stack tests (checks/stack). It is not
// a model and must never be linked into a role (checks/arch refuses a
// product package importing checks/).
//
// # Invariant
//
// Every byte the fake sends copies the wire of upstream llama.cpp
// tools/server at commit 3f545bec (build b10587), read from that source.
// Each behaviour carries a comment citing the upstream file:line it copies
// (paths are under tools/server/ unless prefixed common/); "reference §N"
// and "Observed live" name sections of the notes taken from that reading
// and from a live server, which are kept with the project's shared notes,
// not in this repository (docs/inference-contract.md records what a real
// server was seen to send). Where upstream is silent and the fake had to
// choose, the comment says "reference silent" and what was chosen. A
// change that cannot cite upstream, or say why it chooses, does not belong
// here: the fake is only as useful as it is faithful. The conformance
// suite in pkg/model/llama runs against a real llama-server too, when one is
// given.
//
// # What it models
//
// The fake is one model behind llama-server's router (the deployment), so
// POST bodies must name the model and a request for an unloaded model
// blocks until the model has loaded; the router's GET /models (each
// model's status) and POST /models/load are served too (models.go). Behind that it behaves like a
// single-model child with [Options.Slots] slots of [Options.NCtx] tokens:
//
//   - Rendering: the prompt of a chat request is a pure function of its
//     tools and messages, a Go port of the Qwen3.5 "keep thinking" template
//     (data/qwen3.5-keep-thinking.jinja). [RenderPrompt] exposes it.
//   - Tokenisation: Qwen control tokens (<|im_start|>, <think>, ...) are one
//     token each; every other run of ASCII letters and digits is one token;
//     every other byte is one token. [Tokenize] exposes it.
//   - Generation: the model emits exactly what the template renders for the
//     assistant message it returns, so a client that appends that message
//     unchanged gets a next prompt that extends the previous prompt and
//     reply token for token, as with the real keep-thinking template.
//   - Prompt cache: each slot keeps its last prompt and reply. A new prompt
//     reuses the cache only as an exact continuation (the last sampled
//     token is never cached); any rewind falls back to the one context
//     checkpoint kept 4 tokens before the end of the last prompt, or to a
//     full re-read, as on the deployed hybrid model. With
//     [Options.PromptCache], the host-RAM prompt cache too (promptcache.go):
//     idle slots saved as each task starts, and a pinned slot that would
//     keep under half of its sequence restoring the best-matching entry.
//   - Time: timings and progress times are synthetic (1 ms per prompt
//     token, 15 ms per generated token), so transcripts are reproducible.
//     Real delays come only from [Reply] and [Options.LoadTime].
//
// Replies are scripted with [Server.Script], or chosen by what a request
// holds with [Server.Respond], and can be held mid-stream until released
// ([Reply.Hold]); tests steer slots with [Server.Evict] and
// [Server.Unload] and inspect what the client sent with
// [Server.LastRequest] and [Server.ControlCalls].
package llama
