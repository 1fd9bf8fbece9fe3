package llama

import (
	"context"
	"net/http"

	"wntrmute.dev/boxmaker/pkg/text/truncate"
)

// handleChat serves POST /v1/chat/completions with stream:true.
//
// Order of events, as upstream: the router waits for the model; the request
// is parsed and rendered (errors answer at once); the task is queued on its
// slot, sending nothing while deferred; then the prompt is checked against
// the slot's context (the first error is a plain HTTP error even when
// streaming, server-context.cpp:4242-4253); then the stream runs.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.requestContext(r)
	defer cancel()
	body, req, text, ok := s.renderRequest(ctx, w, r)
	if !ok {
		return
	}
	if !req.stream {
		// Reference silent on the non-streaming shape; the fake does not
		// serve it rather than guess.
		writeError(w, errNotSupported("the fake llama-server only streams: set \"stream\": true"))
		return
	}
	prompt := tokenize(text, true)
	// One id for the whole request (server-common.cpp:109-111,
	// server-context.cpp:4127).
	cmplID := "chatcmpl-" + s.randomID()

	ctx, cancelTask := context.WithCancel(ctx)
	defer cancelTask()
	t := &task{
		cmplID: cmplID, armed: req.control, cancel: cancelTask,
		nPrompt: len(prompt), nPredict: req.nPredict, params: req.params,
	}
	sl, err := s.acquire(ctx, req.idSlot, prompt, t)
	if err != nil {
		return
	}
	s.mu.Lock()
	sl.lastBody = body
	sl.bodies = append(sl.bodies, body)
	cacheN := reuse(sl, prompt)
	oldCP := sl.checkpoint
	t.nCache = cacheN
	s.mu.Unlock()

	// Reference silent on a prompt exactly n_ctx long; the fake refuses it
	// too, since no token could be generated after it.
	if len(prompt) >= s.opts.NCtx {
		s.release(sl, t, true, nil, 0, 0)
		writeError(w, errExceedContext(len(prompt), s.opts.NCtx))
		return
	}

	ping := s.opts.PingInterval
	if req.pingSet {
		ping = req.ping
	}
	g := &generation{
		s: s, t: t, req: req, reply: s.nextReply(body),
		st:     newSSE(ctx, w, ping),
		prompt: prompt, cacheN: cacheN, cmplID: cmplID,
		created:   s.opts.Now().Unix(),
		sl:        sl,
		seq:       append([]string(nil), prompt[:cacheN]...),
		evaluated: cacheN,
		cp:        checkpointAfter(oldCP, cacheN, cacheN),
	}
	g.plan = makePlan(g.reply, req.thinking, s.randomID)
	g.argsSent = make([]int, len(g.plan.calls))
	g.run()
	if !g.released {
		s.release(sl, t, false, g.seq, g.evaluated, g.cp)
	}
}

// generation is one streamed completion. It runs on the handler goroutine.
type generation struct {
	s      *Server
	t      *task
	req    *chatRequest
	reply  Reply
	st     *sse
	prompt []string
	cacheN int
	cmplID string
	// created is the completion's "created" time.
	created int64
	plan    plan

	// What the slot holds when the generation ends, however it ends.
	seq       []string
	evaluated int
	cp        int
	// sl is the task's slot; released once finish has freed it.
	sl       *slot
	released bool

	pendReasoning, pendContent string // held back: incomplete UTF-8
	argsSent                   []int  // bytes of each call's arguments sent
}

func (g *generation) run() {
	st, req := g.st, g.req
	if err := st.start(); err != nil {
		return
	}
	// Progress: a chunk when prompt processing starts and one after each
	// batch (server-context.cpp:3289-3296, 3679-3685, 1941-1946). Reference
	// silent on "processed" in the first one; since processed includes the
	// cached tokens, the fake sends the cached count (0% of the new work).
	if req.returnProgress {
		if st.events(g.progressChunk(0)) != nil {
			return
		}
	}
	promptN := len(g.prompt) - g.cacheN
	for done := 0; done < promptN; {
		if st.sleep(g.reply.BatchDelay, true) != nil {
			return
		}
		done += min(g.s.opts.NBatch, promptN-done)
		g.seq = append(g.seq[:g.cacheN], g.prompt[g.cacheN:g.cacheN+done]...)
		g.evaluated = len(g.seq)
		g.s.mu.Lock()
		g.t.nProcessed = done
		g.s.mu.Unlock()
		if req.returnProgress && st.events(g.progressChunk(done)) != nil {
			return
		}
	}
	g.cp = checkpointAfter(g.cp, g.cacheN, len(g.prompt))
	g.generate()
}

func (g *generation) generate() {
	st, req, reply := g.st, g.req, g.reply
	queue := append(append(append([]genToken(nil), g.plan.reasoning...), g.plan.close...), g.plan.rest...)
	nReasoning := len(g.plan.reasoning)
	forced, stalled, held := false, false, false
	n := 0 // tokens decoded
	finish := "length"
	for i := 0; i < len(queue); {
		if reply.Stall > 0 && !stalled && n == reply.StallAfter {
			stalled = true
			if st.sleep(reply.Stall, false) != nil {
				return
			}
		}
		if reply.Hold != nil && !held && n == reply.StallAfter {
			held = true
			if st.wait(reply.Hold) != nil {
				return
			}
		}
		if reply.Error != nil && n == reply.ErrorAfter {
			// A mid-stream error is a data event, and the stream closes
			// with no [DONE] (server-context.cpp:4276-4285, 4350-4354).
			st.events(marshal(struct {
				Error *Error `json:"error"`
			}{reply.Error}))
			return
		}
		// "length" covers n_predict and running out of context; context
		// shift is off, so generation just stops (:1131-1139, :1774-1782).
		if req.nPredict >= 0 && n >= req.nPredict || len(g.prompt)+n >= g.s.opts.NCtx {
			break
		}
		if n > 0 && st.sleep(reply.TokenDelay, true) != nil {
			return
		}
		if !forced && i < nReasoning && g.endReasoning(i) {
			forced = true
			queue = append(append(queue[:i:i], forcedEnd(req.budgetMessage)...), g.plan.rest...)
		}
		tok := queue[i]
		i++
		n++
		g.seq = append(g.seq, tok.piece)
		g.evaluated = len(g.seq) - 1 // the last sampled token is not decoded
		g.s.mu.Lock()
		g.t.nDecoded = n
		g.t.newLine = g.t.newLine || tok.piece == "\n"
		g.s.mu.Unlock()

		ds := g.deltas(tok)
		if n == 1 {
			// The first generated token's chunk starts with the role delta
			// (server-task.cpp:1133-1138).
			ds = append([]any{roleDelta{Role: "assistant"}}, ds...)
		}
		events := make([][]byte, len(ds))
		for j, d := range ds {
			var tm *timings
			if req.timingsPerToken && j == len(ds)-1 {
				// server-context.cpp:1970-1973: the last event of every
				// partial result carries timings.
				tm = makeTimings(g.cacheN, len(g.prompt)-g.cacheN, n)
			}
			events[j] = g.chunk(d, tm)
		}
		if len(events) > 0 && st.events(events...) != nil {
			return
		}
		if tok.kind == kindEOS {
			finish = "stop"
			// "tool_calls" when the message has tool calls and generation
			// stopped on EOS (server-task.cpp:462-527).
			if len(g.plan.calls) > 0 {
				finish = "tool_calls"
			}
			break
		}
	}
	g.finish(finish, n)
}

// endReasoning reports whether reasoning must end before reasoning token i:
// a reasoning_end control call arrived (server-context.cpp:2337-2369), or
// reasoning_budget_tokens ran out (server-common.cpp:1351-1367; 0 ends at
// once). Both act only inside the thinking block, in state COUNTING
// (common/reasoning-budget.cpp:291-310), which is why the caller asks only
// while reasoning tokens remain. From the next token the server forces
// reasoning_budget_message and the end tag, then samples freely, so the
// model's answer and tool calls follow (forcedEnd); the same code at
// llama.cpp 1425386fd: server-context.cpp:2426-2458,
// common/reasoning-budget.cpp:117-123, 143-163, 251-270.
func (g *generation) endReasoning(i int) bool {
	if g.req.budgetTokens >= 0 && i >= g.req.budgetTokens {
		return true
	}
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	return g.t.endReasoning
}

// finish sends the finish chunk, the usage chunk if asked for, and [DONE].
// timings go on the last of them (server-task.cpp:462-527).
func (g *generation) finish(reason string, n int) {
	fin := chunk{
		Choices: []choice{{FinishReason: &reason, Delta: struct{}{}}},
		Created: g.created, ID: g.cmplID, Model: g.s.opts.ModelAlias,
		SystemFingerprint: g.s.opts.BuildInfo, Object: "chat.completion.chunk",
	}
	tm := makeTimings(g.cacheN, len(g.prompt)-g.cacheN, n)
	events := [][]byte{}
	if g.req.includeUsage {
		u := fin
		u.Choices = []choice{}
		u.Usage = &usage{
			CompletionTokens:    n,
			PromptTokens:        len(g.prompt),
			TotalTokens:         len(g.prompt) + n,
			PromptTokensDetails: promptDetails{CachedTokens: g.cacheN},
		}
		u.Timings = tm
		events = append(events, marshal(fin), marshal(u))
	} else {
		fin.Timings = tm
		events = append(events, marshal(fin))
	}
	// The slot is free before the client can read the end: upstream's
	// update_slots does send_final_response then slot.release() in one
	// step of the loop that also takes the next task, so a request sent
	// after this answer never finds the slot busy (and the prompt cache
	// saves it as idle: promptcache.go).
	g.s.release(g.sl, g.t, false, g.seq, g.evaluated, g.cp)
	g.released = true
	if g.st.events(events...) != nil {
		return
	}
	// server-context.cpp:4316: the stream ends with data: [DONE].
	g.st.events([]byte("[DONE]"))
}

func (g *generation) chunk(delta any, tm *timings) []byte {
	return marshal(chunk{
		Choices: []choice{{Delta: delta}},
		Created: g.created, ID: g.cmplID, Model: g.s.opts.ModelAlias,
		SystemFingerprint: g.s.opts.BuildInfo, Object: "chat.completion.chunk",
		Timings: tm,
	})
}

// progressChunk is the role delta plus prompt_progress, with done new
// prompt tokens processed (server-task.cpp:242-249).
func (g *generation) progressChunk(done int) []byte {
	c := chunk{
		Choices: []choice{{Delta: roleDelta{Role: "assistant"}}},
		Created: g.created, ID: g.cmplID, Model: g.s.opts.ModelAlias,
		SystemFingerprint: g.s.opts.BuildInfo, Object: "chat.completion.chunk",
		PromptProgress: &progress{
			Total:     len(g.prompt),
			Cache:     g.cacheN,
			Processed: g.cacheN + done,
			TimeMS:    int(float64(done) * promptTokenMS),
		},
	}
	return marshal(c)
}

// deltas returns the chunks one generated token produces: reasoning and
// content text as it completes into whole characters, and tool-call
// arguments spread over the tokens of the call's XML, as the server diffs
// the parsed message after each token (common/chat.cpp:266-330).
func (g *generation) deltas(tok genToken) []any {
	switch tok.kind {
	case kindReasoning:
		if d := completeText(&g.pendReasoning, tok.piece); d != "" {
			return []any{reasoningDelta{d}}
		}
	case kindContent:
		if d := completeText(&g.pendContent, tok.piece); d != "" {
			return []any{contentDelta{d}}
		}
	case kindTool:
		c := g.plan.calls[tok.call]
		// A fragment never ends inside a UTF-8 sequence: the server
		// streams whole characters.
		cut, _ := truncate.Bytes(c.args, len(c.args)*(tok.pos+1)/tok.of)
		end := len(cut)
		frag := c.args[g.argsSent[tok.call]:end]
		g.argsSent[tok.call] = end
		d := toolCallDelta{Index: tok.call, Function: functionDelta{Arguments: frag}}
		if tok.pos == 0 {
			d.ID, d.Type, d.Function.Name = c.id, "function", c.name
		} else if frag == "" {
			return nil
		}
		return []any{toolDelta{[]toolCallDelta{d}}}
	}
	return nil
}

// completeText appends piece to the pending text and returns its longest
// complete-UTF-8 prefix, keeping the rest pending.
func completeText(pend *string, piece string) string {
	*pend += piece
	out := completeUTF8(*pend)
	*pend = (*pend)[len(out):]
	return out
}

// renderRequest reads, routes, parses and renders a chat request, as both
// a chat completion and input_tokens do; on failure it has answered.
func (s *Server) renderRequest(ctx context.Context, w http.ResponseWriter, r *http.Request) ([]byte, *chatRequest, string, bool) {
	body, fields, ok := s.readBody(w, r)
	if !ok || !s.route(ctx, w, r, fields) {
		return nil, nil, "", false
	}
	req, apiErr := parseChat(fields)
	if apiErr == nil {
		apiErr = checkMedia(req.messages, s.opts.Vision)
	}
	if apiErr != nil {
		writeError(w, apiErr)
		return nil, nil, "", false
	}
	text, err := renderPrompt(req.tools, req.messages, req.thinking, s.opts.DropEarlierThinking)
	if err != nil {
		writeError(w, renderError(err))
		return nil, nil, "", false
	}
	return body, req, text, true
}
