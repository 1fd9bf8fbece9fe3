package llama

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Complete runs one streamed chat completion and returns the assistant
// message exactly as the server produced it, with its accounting.
//
// prev is the slot's state after the previous completion of the same
// conversation (zero if unknown); the returned Completion.Slot is the state to
// pass next time. On error there is no Completion, and the slot's content is
// whatever the server kept: passing the old prev again is right.
//
// Liveness, not deadlines: only ctx cancellation stops a healthy stream,
// however long it runs. Before the first byte (the response headers, which
// the server flushes with its first result) the request may be queued behind
// another on its slot or waiting for a model load, which look the same on the
// wire. When the shorter of FirstByteTimeout and ModelLoadTimeout has passed
// without a byte, the client asks GET /slots (never loading the model) once:
// if the pinned slot is processing, the wait is a busy slot and
// FirstByteTimeout applies; otherwise (slot idle, model not loaded, /slots
// failing) ModelLoadTimeout applies. Both count from the start of the request.
// After the first byte, IdleTimeout is the longest allowed silence.
//
// Errors: *ServerError for the server's error object (HTTP or mid-stream),
// *StreamError for a stream that broke the protocol or was truncated,
// *LivenessError when a limit fired, and a wrapped transport or context
// error otherwise.
func (c *Client) Complete(ctx context.Context, req Request, prev SlotState) (*Completion, error) {
	const op = "chat completion"
	if len(req.Messages) == 0 {
		return nil, errors.New("chat completion: no messages")
	}
	switch req.ToolChoice {
	case "", "auto", "none", "required":
	default:
		return nil, fmt.Errorf("chat completion: tool_choice %q is not auto, none or required", req.ToolChoice)
	}
	body, err := c.chatBody(req)
	if err != nil {
		return nil, fmt.Errorf("%s: encode request: %w", op, err)
	}

	w, reqCtx := startWatchdog(ctx, op, limits{
		firstByte: c.firstByte, modelLoad: c.modelLoad, idle: c.idle, busy: c.slotBusy,
	})
	defer w.stop()
	hreq, err := http.NewRequestWithContext(reqCtx, http.MethodPost, c.url("/v1/chat/completions", nil), body.reader())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	// The body is segments, which net/http cannot measure itself: without
	// a length it would switch to chunked encoding.
	hreq.ContentLength = body.n
	hreq.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(body.reader()), nil }
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	// llama-server b10587 closes the connection after every streamed
	// response although it answers Keep-Alive; a pooled connection then
	// races with that close and the next POST fails with EOF (seen in 3 of
	// 300 back-to-back calls against a real server; docs/inference-contract.md).
	// One connection per request costs nothing next to inference.
	hreq.Close = true
	resp, err := c.http.Do(hreq)
	if err != nil {
		return nil, w.err(fmt.Errorf("%s: %w", op, err))
	}
	defer resp.Body.Close()
	// The server sends no headers while the request is queued or the model
	// loads; the first result flushes them (reference:
	// server-context.cpp:3291-3296). Headers therefore end the wait.
	w.gotByte()
	r := liveReader{resp.Body, w}

	if resp.StatusCode != http.StatusOK {
		// Errors found before streaming (context overflow, bad request)
		// come back as a normal HTTP error (server-context.cpp:4242-4253).
		data, err := readCapped(r)
		if err != nil {
			return nil, w.err(fmt.Errorf("%s: read error response: %w", op, err))
		}
		return nil, parseErrorBody(op, resp.StatusCode, data)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return nil, fmt.Errorf("%s: response content type %s is not an event stream", op, clip(ct))
	}

	// The control call runs beside the stream, which keeps being read: the
	// server acts on it between tokens, and stopping to wait would only
	// stall the stream.
	ctlCtx, cancelCtl := context.WithCancel(ctx)
	defer cancelCtl()
	var ctlDone chan struct{}
	var ctlErr error
	acc := &accumulator{
		capAt:   c.thinkingCap,
		onEvent: req.OnEvent,
		onCap: func(id string) {
			if ctlDone != nil {
				return // the accumulator calls this once; be sure of it
			}
			done := make(chan struct{})
			ctlDone = done
			go func() {
				defer close(done)
				ctlErr = c.EndReasoning(ctlCtx, id)
			}()
		},
	}
	err = readStream(r, c.maxEvent, acc)
	if err != nil {
		cancelCtl() // the answer no longer matters
	}
	if ctlDone != nil {
		<-ctlDone
	}
	if err != nil {
		if le := w.fired(); le != nil {
			return nil, le
		}
		var se *StreamError
		var srv *ServerError
		if errors.As(err, &se) || errors.As(err, &srv) {
			return nil, err
		}
		return nil, fmt.Errorf("%s: read stream: %w", op, err)
	}
	comp := acc.completion()
	comp.CapErr = ctlErr
	comp.account(prev)
	return comp, nil
}
