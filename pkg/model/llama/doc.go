// Package llama is the client for llama-server's OpenAI-compatible chat
// endpoint and the few introspection endpoints the startup self-test needs.
//
// Two programs use it: loopd, which has no network and reaches the server
// through inferproxy's Unix socket ([Config.SocketPath]), and bxctl
// (selftest, verify-device, doctor, status), which talks to a URL
// ([Config.BaseURL]); package selftest runs its checks through it for both.
// Nothing else should: every request
// goes to the one server and slot named in the [Config], and the wire shapes
// here follow upstream llama.cpp tools/server at commit 3f545bec (build
// b10587); the "reference:" comments cite its files and lines, and
// docs/inference-contract.md records what a real server was seen to send.
// The messages and tools it carries are package chat's, so that a reader
// of the session log needs no inference client.
//
// # Guarantees
//
//   - Replay is exact. [Client.Complete] returns the assistant
//     [chat.Message] as the server streamed it: content, reasoning_content
//     and tool_calls are the byte-for-byte concatenation of their
//     fragments, and marshalling a [chat.Message] back into a request does
//     not alter any string (no HTML escaping, fields in struct order). The
//     session log can therefore store a reply and resend it unchanged, which
//     keeps turn N+1 a prefix extension of turn N (design brief, inference
//     contract 2).
//   - The body is exact and costs what is new. A request whose messages
//     extend the previous request's (the normal case: the prompt is
//     append-only) encodes only the new messages and reuses the encoding
//     of the rest; any other request is encoded whole. Either way the
//     bytes sent are those of encoding the whole request, and bytes a
//     request body refers to are never written again.
//   - Liveness, never a deadline. A completion has no total time limit. Before
//     the first byte it may wait [Config.FirstByteTimeout] for a busy slot or
//     [Config.ModelLoadTimeout] for a model load; after it, any silence longer
//     than [Config.IdleTimeout] fails it. Every byte (tokens, progress events,
//     SSE pings) counts. A limit that fires is reported as a [*LivenessError]
//     naming the limit.
//   - Hostile bytes are bounded. An SSE line or event larger than
//     [Config.MaxEventBytes] and any response body larger than a fixed cap is
//     an error, not an allocation. Chunks that contradict the protocol (a tool
//     call index that skips ahead, a second id for one call, content after the
//     finish reason) are a [*StreamError], never silently merged.
//   - Cache loss is data, not an error. Each [Completion] carries the gap
//     between the previous context on the slot ([SlotState]) and what the
//     server reused, and a [CacheLoss] when more than the last sampled token
//     was lost. The caller owns the [SlotState] and passes it in, so loopd can
//     persist it with the session.
//
// # Protocol flow
//
// One completion is one POST /v1/chat/completions with stream, return_progress,
// stream_options.include_usage and reasoning_control set, pinned with id_slot.
// The response is an SSE stream of chat.completion.chunk objects ending in
// "data: [DONE]"; a mid-stream error is a single {"error":{...}} event with no
// [DONE]. When the count of reasoning deltas reaches [Config.ThinkingCap], the
// client sends POST /v1/chat/completions/control with action reasoning_end
// for that completion id, once, while it keeps reading the stream.
package llama
