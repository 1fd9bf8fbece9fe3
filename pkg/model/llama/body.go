package llama

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"slices"
	"sync"

	"wntrmute.dev/boxmaker/pkg/model/chat"
)

// A completion request's body is the encoding of chatRequest. Its messages
// array is by far the largest part and, in a session, the request of turn
// N+1 repeats turn N's messages unchanged and adds some (the prompt is
// append-only: design brief, inference contract 2). The client therefore
// keeps the encoded messages of the last request it sent (a [bodyCache])
// and encodes only what a new request adds. The body is sent as segments
// (head, the encoded messages, tail), so it is never copied whole either.
//
// Exactness: the bytes sent are those of [Client.fullBody] in every case.
// Each message is encoded on its own by the same encoder settings that
// encode the whole request (encoding/json encodes a slice element by
// element, with no state between them), and the head and tail are cut from
// the encoding of the same chatRequest with an empty messages array.
// TestBodyMatchesFullEncoding checks it on random conversations.

// messagesKey is where the messages array sits in an encoded chatRequest
// whose messages are empty. It cannot occur earlier, inside the encoded
// model name: a JSON string holds no unescaped quote.
var messagesKey = []byte(`,"messages":[]`)

// bodyCache holds the messages of the last completion request and their
// encoding. One per [Client], and so one per slot: the server's slot
// caches one prompt too, so a second conversation on the same slot costs
// the server a full re-read whatever the client does, and a full encode
// next to that is noise. Its memory is bounded by one request.
type bodyCache struct {
	mu sync.Mutex // guards every field
	// msgs is a copy of the messages encoded in enc, deep enough that the
	// caller cannot change it (tool call slices are copied; strings are
	// immutable). A new request reuses enc only if its messages start
	// with these, field for field.
	msgs []chat.Message
	// enc is the encoding of msgs, comma-separated, without brackets.
	// Bytes below len(enc) are never written again once a body refers to
	// them (a body may still be on its way to the server): enc only grows
	// by append, and a request that does not extend msgs gets a new array.
	enc []byte
	// scratch encodes one message at a time; its bytes are copied to enc.
	scratch bytes.Buffer
}

// requestBody is a request body as segments. Its zero value is empty.
type requestBody struct {
	segs [][]byte
	n    int64
}

// reader returns a reader over the body; each call starts from the top,
// so it also serves http.Request.GetBody.
func (b requestBody) reader() io.Reader {
	bufs := net.Buffers(slices.Clone(b.segs))
	return &bufs
}

// bytes returns the body as one slice. For tests and small bodies.
func (b requestBody) bytes() []byte {
	return bytes.Join(b.segs, nil)
}

// chatBody encodes the body for req, reusing the encoding of the previous
// request's messages when req's messages extend them.
func (c *Client) chatBody(req Request) (requestBody, error) {
	shell, err := c.encodeRequest(req, []chat.Message{}, 0)
	if err != nil {
		return requestBody{}, err
	}
	i := bytes.Index(shell, messagesKey)
	if i < 0 {
		// Cannot happen with chatRequest as it is; never guess a split.
		return requestBody{}, errors.New("encode request: no messages array in the encoding")
	}
	cut := i + len(messagesKey) - 1 // just before "]"
	head, tail := shell[:cut], shell[cut:]
	enc := c.cache.encode(req.Messages)
	return requestBody{segs: [][]byte{head, enc, tail}, n: int64(len(head) + len(enc) + len(tail))}, nil
}

// encode returns the encoding of msgs (comma-separated, no brackets). The
// returned slice is never written again.
func (bc *bodyCache) encode(msgs []chat.Message) []byte {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	if !bc.extends(msgs) {
		// A new array: the old one may still be in a body being sent.
		bc.msgs, bc.enc = nil, make([]byte, 0, sizeHint(msgs))
	}
	for i := len(bc.msgs); i < len(msgs); i++ {
		m := msgs[i]
		m.ToolCalls = slices.Clone(m.ToolCalls)
		m.Images = slices.Clone(m.Images)
		bc.msgs = append(bc.msgs, m)
		if i > 0 {
			bc.enc = append(bc.enc, ',')
		}
		bc.enc = append(bc.enc, bc.encodeOne(&m)...)
	}
	return bc.enc[:len(bc.enc):len(bc.enc)]
}

// extends reports whether msgs starts with every cached message. When the
// caller's strings are the cached ones (loopd's session hands out the same
// message list each time), each comparison stops at the string header.
func (bc *bodyCache) extends(msgs []chat.Message) bool {
	if bc.enc == nil || len(msgs) < len(bc.msgs) {
		return false
	}
	for i := range bc.msgs {
		if !sameMessage(&bc.msgs[i], &msgs[i]) {
			return false
		}
	}
	return true
}

// encodeOne encodes m as encoding/json encodes a messages element.
func (bc *bodyCache) encodeOne(m *chat.Message) []byte {
	bc.scratch.Reset()
	enc := json.NewEncoder(&bc.scratch)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		// A chat.Message is strings and slices of strings: encoding/json
		// cannot fail on it (invalid UTF-8 becomes U+FFFD, as in the whole
		// request).
		panic("llama: encode message: " + err.Error())
	}
	b := bc.scratch.Bytes()
	return b[:len(b)-1] // Encode's newline
}

// sameMessage compares every field of two messages. TestSameMessageFields
// fails when chat.Message gains a field this does not compare.
func sameMessage(a, b *chat.Message) bool {
	return a.Role == b.Role && a.Content == b.Content && a.ReasoningContent == b.ReasoningContent &&
		a.ToolCallID == b.ToolCallID && a.Name == b.Name && slices.Equal(a.ToolCalls, b.ToolCalls) && slices.Equal(a.Images, b.Images)
}

func sizeHint(msgs []chat.Message) int {
	hint := 0
	for i := range msgs {
		m := &msgs[i]
		hint += 64 + len(m.Content) + len(m.ReasoningContent)
		for _, im := range m.Images {
			hint += 64 + len(im.URL)
		}
		for _, tc := range m.ToolCalls {
			hint += 96 + len(tc.Function.Arguments)
		}
	}
	return hint + hint/8
}

// fullBody encodes the whole body in one piece, as the client did before
// it kept a cache: the reference the segments are tested against.
func (c *Client) fullBody(req Request) ([]byte, error) {
	return c.encodeRequest(req, req.Messages, sizeHint(req.Messages))
}

// encodeRequest encodes chatRequest for req with msgs as its messages.
func (c *Client) encodeRequest(req Request, msgs []chat.Message, hint int) ([]byte, error) {
	hint += 512
	for _, t := range req.Tools {
		hint += 128 + len(t.Function.Description) + len(t.Function.Parameters)
	}
	sampling, maxTokens := c.sampling, c.maxTokens
	if req.Sampling != nil {
		sampling = *req.Sampling
	}
	if req.MaxTokens > 0 {
		maxTokens = req.MaxTokens
	}
	return marshalJSON(chatRequest{
		Model:            c.model,
		Messages:         msgs,
		Tools:            req.Tools,
		ToolChoice:       req.ToolChoice,
		Stream:           true,
		StreamOptions:    streamOptions{IncludeUsage: true},
		ReturnProgress:   true,
		ReasoningControl: true,
		IDSlot:           c.slot,
		Temperature:      sampling.Temperature,
		TopP:             sampling.TopP,
		TopK:             sampling.TopK,
		MaxTokens:        maxTokens,
	}, hint)
}
