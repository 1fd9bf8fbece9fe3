package llama

import "wntrmute.dev/boxmaker/pkg/model/chat"

// decodeChunk decodes one chunk event into c. It is json.Unmarshal(data, c)
// made fast for the chunks llama-server sends (one a token, so hundreds a
// turn, where encoding/json's reflection was most of the client's cost):
// a small scanner that knows the chunk's fields.
//
// It gives up, and the caller uses json.Unmarshal, on anything it does not
// decode exactly as encoding/json does: a key that is not plain ASCII or
// that matches a field only when case is folded, a repeated field, a value
// of the wrong type, an error object, nesting deeper than maxChunkDepth,
// invalid JSON, trailing data. When it succeeds, c holds what json.Unmarshal
// would have produced (FuzzChunkDecode checks it against json.Unmarshal).
//
// id, model and fprint are the previous chunk's values: an equal string is
// reused instead of allocated again.
func decodeChunk(data []byte, c *chunk, id, model, fprint string) bool {
	p := jscan{b: data}
	var seen uint16
	ok := p.object(func(key []byte) bool {
		switch string(key) {
		case "id":
			return p.once(&seen, 1) && p.str(&c.ID, id)
		case "model":
			return p.once(&seen, 2) && p.str(&c.Model, model)
		case "system_fingerprint":
			return p.once(&seen, 4) && p.str(&c.SystemFingerprint, fprint)
		case "choices":
			return p.once(&seen, 8) && p.choices(&c.Choices)
		case "usage":
			return p.once(&seen, 16) && p.usage(&c.Usage)
		case "timings":
			return p.once(&seen, 32) && p.timings(&c.Timings)
		case "prompt_progress":
			return p.once(&seen, 64) && p.progress(&c.PromptProgress)
		}
		// "error" is rare and handled by encoding/json.
		return p.unknown(key, "id", "model", "system_fingerprint", "choices", "usage", "timings", "prompt_progress", "error")
	})
	p.ws()
	return ok && p.i == len(p.b)
}

// The chunk's own shapes. Each mirrors its struct's json tags; the names
// passed to unknown are every tag of the struct.

func (p *jscan) choices(dst *[]chunkChoice) bool {
	if p.null() {
		*dst = nil
		return true
	}
	out := make([]chunkChoice, 0, 1) // [] decodes as empty, not nil
	ok := p.array(func() bool {
		out = append(out, chunkChoice{})
		return p.choice(&out[len(out)-1])
	})
	*dst = out
	return ok
}

func (p *jscan) choice(ch *chunkChoice) bool {
	var seen uint16
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "index":
			return p.once(&seen, 1) && p.int(&ch.Index)
		case "finish_reason":
			if !p.once(&seen, 2) {
				return false
			}
			if p.null() {
				return true
			}
			ch.FinishReason = new(string)
			return p.str(ch.FinishReason, "")
		case "delta":
			return p.once(&seen, 4) && p.delta(&ch.Delta)
		}
		return p.unknown(key, "index", "finish_reason", "delta")
	})
}

func (p *jscan) delta(d *chunkDelta) bool {
	if p.null() {
		return true
	}
	var seen uint16
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "role":
			return p.once(&seen, 1) && p.str(&d.Role, chat.RoleAssistant)
		case "content":
			return p.once(&seen, 2) && p.str(&d.Content, "")
		case "reasoning_content":
			return p.once(&seen, 4) && p.str(&d.ReasoningContent, "")
		case "tool_calls":
			return p.once(&seen, 8) && p.toolCalls(&d.ToolCalls)
		}
		return p.unknown(key, "role", "content", "reasoning_content", "tool_calls")
	})
}

func (p *jscan) toolCalls(dst *[]toolCallDelta) bool {
	if p.null() {
		return true
	}
	out := make([]toolCallDelta, 0, 1)
	ok := p.array(func() bool {
		out = append(out, toolCallDelta{})
		return p.toolCall(&out[len(out)-1])
	})
	*dst = out
	return ok
}

func (p *jscan) toolCall(tc *toolCallDelta) bool {
	var seen uint16
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "index":
			if !p.once(&seen, 1) {
				return false
			}
			if p.null() {
				return true
			}
			tc.Index = new(int)
			return p.int(tc.Index)
		case "id":
			return p.once(&seen, 2) && p.str(&tc.ID, "")
		case "type":
			return p.once(&seen, 4) && p.str(&tc.Type, "function")
		case "function":
			if !p.once(&seen, 8) {
				return false
			}
			if p.null() {
				return true
			}
			var fseen uint16
			return p.object(func(key []byte) bool {
				switch string(key) {
				case "name":
					return p.once(&fseen, 1) && p.str(&tc.Function.Name, "")
				case "arguments":
					return p.once(&fseen, 2) && p.str(&tc.Function.Arguments, "")
				}
				return p.unknown(key, "name", "arguments")
			})
		}
		return p.unknown(key, "index", "id", "type", "function")
	})
}

func (p *jscan) usage(dst **Usage) bool {
	if p.null() {
		return true
	}
	u := new(Usage)
	*dst = u
	var seen uint16
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "completion_tokens":
			return p.once(&seen, 1) && p.int(&u.CompletionTokens)
		case "prompt_tokens":
			return p.once(&seen, 2) && p.int(&u.PromptTokens)
		case "total_tokens":
			return p.once(&seen, 4) && p.int(&u.TotalTokens)
		case "prompt_tokens_details":
			if !p.once(&seen, 8) {
				return false
			}
			if p.null() {
				return true
			}
			var dseen uint16
			return p.object(func(key []byte) bool {
				if string(key) == "cached_tokens" {
					return p.once(&dseen, 1) && p.int(&u.PromptTokensDetails.CachedTokens)
				}
				return p.unknown(key, "cached_tokens")
			})
		}
		return p.unknown(key, "completion_tokens", "prompt_tokens", "total_tokens", "prompt_tokens_details")
	})
}

func (p *jscan) timings(dst **Timings) bool {
	if p.null() {
		return true
	}
	t := new(Timings)
	*dst = t
	var seen uint16
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "cache_n":
			return p.once(&seen, 1<<0) && p.int(&t.CacheN)
		case "prompt_n":
			return p.once(&seen, 1<<1) && p.int(&t.PromptN)
		case "prompt_ms":
			return p.once(&seen, 1<<2) && p.float(&t.PromptMS)
		case "prompt_per_token_ms":
			return p.once(&seen, 1<<3) && p.float(&t.PromptPerTokenMS)
		case "prompt_per_second":
			return p.once(&seen, 1<<4) && p.float(&t.PromptPerSecond)
		case "predicted_n":
			return p.once(&seen, 1<<5) && p.int(&t.PredictedN)
		case "predicted_ms":
			return p.once(&seen, 1<<6) && p.float(&t.PredictedMS)
		case "predicted_per_token_ms":
			return p.once(&seen, 1<<7) && p.float(&t.PredictedPerTokenMS)
		case "predicted_per_second":
			return p.once(&seen, 1<<8) && p.float(&t.PredictedPerSecond)
		case "draft_n":
			return p.once(&seen, 1<<9) && p.int(&t.DraftN)
		case "draft_n_accepted":
			return p.once(&seen, 1<<10) && p.int(&t.DraftNAccepted)
		}
		return p.unknown(key, "cache_n", "prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second",
			"predicted_n", "predicted_ms", "predicted_per_token_ms", "predicted_per_second", "draft_n", "draft_n_accepted")
	})
}

func (p *jscan) progress(dst **PromptProgress) bool {
	if p.null() {
		return true
	}
	pp := new(PromptProgress)
	*dst = pp
	var seen uint16
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "total":
			return p.once(&seen, 1) && p.int(&pp.Total)
		case "cache":
			return p.once(&seen, 2) && p.int(&pp.Cache)
		case "processed":
			return p.once(&seen, 4) && p.int(&pp.Processed)
		case "time_ms":
			return p.once(&seen, 8) && p.int64(&pp.TimeMS)
		}
		return p.unknown(key, "total", "cache", "processed", "time_ms")
	})
}
