package toolargs

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// Caps on consult's arguments: the model writes a self-contained
// question and, optionally, the context it needs; nothing else of the
// session can reach the payload, so these caps are the payload's.
const (
	MaxConsultQuestion = 8 << 10
	MaxConsultContext  = 32 << 10
)

// Consult asks a remote model one self-contained question. Context is
// optional ("" when absent).
type Consult struct {
	Question string
	Context  string
}

type consultWire struct {
	Question string `json:"question"`
	Context  string `json:"context,omitempty"`
}

// Tool implements Args.
func (Consult) Tool() string { return toolset.Consult }

// MarshalJSON writes the wire form.
func (a Consult) MarshalJSON() ([]byte, error) {
	return strict.Marshal(consultWire(a))
}

func parseConsult(raw []byte) (Args, error) {
	var w consultWire
	if err := strict.Unmarshal(raw, &w); err != nil {
		return nil, err
	}
	if strings.TrimSpace(w.Question) == "" {
		return nil, errors.New("question: empty")
	}
	if err := checkText("question", w.Question, MaxConsultQuestion); err != nil {
		return nil, err
	}
	if err := checkText("context", w.Context, MaxConsultContext); err != nil {
		return nil, err
	}
	return Consult(w), nil
}

func checkText(name, s string, limit int) error {
	switch {
	case len(s) > limit:
		return fmt.Errorf("%s: longer than %d bytes", name, limit)
	case !utf8.ValidString(s):
		return fmt.Errorf("%s: not valid UTF-8", name)
	case slices.Contains([]byte(s), 0):
		return fmt.Errorf("%s: contains a NUL byte", name)
	}
	return nil
}

// Limits on a consult's wait, in milliseconds: the liveness limit (no
// byte of the response for this long ends the call) and the total bound.
const (
	MinConsultMS = 100
	MaxConsultMS = 60 * 60 * 1000
)

// ConsultCall is what consult's tool container gets instead of the
// model's arguments: the exact request brokerd built from them and
// appended to the consult log before it ran the container. The toolkit
// sends Body unchanged to URL; it builds nothing itself.
type ConsultCall struct {
	URL     URL    // https, {base}/chat/completions
	Body    string // the request body, JSON, byte for byte as logged
	IdleMS  int64  // no byte for this long: the call fails (liveness)
	TotalMS int64  // the whole exchange is bounded by this
}

type consultCallWire struct {
	URL     string `json:"url"`
	Body    string `json:"body"`
	IdleMS  int64  `json:"idle_ms"`
	TotalMS int64  `json:"total_ms"`
}

// MaxConsultBody caps the body: the capped arguments, escaped, plus the
// fixed system text and the request's few fields.
const MaxConsultBody = 4 * (MaxConsultQuestion + MaxConsultContext)

// MarshalJSON writes the wire form.
func (c ConsultCall) MarshalJSON() ([]byte, error) {
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("marshal consult call: %w", err)
	}
	return strict.Marshal(consultCallWire{c.URL.String(), c.Body, c.IdleMS, c.TotalMS})
}

// ParseConsultCall reads a consult container's arguments strictly.
func ParseConsultCall(raw []byte) (ConsultCall, error) {
	var w consultCallWire
	if err := strict.Unmarshal(raw, &w); err != nil {
		return ConsultCall{}, err
	}
	u, err := ParseURL(w.URL)
	if err != nil {
		return ConsultCall{}, err
	}
	c := ConsultCall{u, w.Body, w.IdleMS, w.TotalMS}
	if err := c.check(); err != nil {
		return ConsultCall{}, err
	}
	return c, nil
}

func (c ConsultCall) check() error {
	switch {
	case c.URL.IsZero() || !strings.HasPrefix(c.URL.String(), "https://"):
		return errors.New("url: a consult goes over https only")
	case !strings.HasSuffix(c.URL.String(), "/chat/completions"):
		return errors.New("url: must end in /chat/completions")
	case c.Body == "" || len(c.Body) > MaxConsultBody:
		return fmt.Errorf("body: empty or longer than %d bytes", MaxConsultBody)
	case c.IdleMS < MinConsultMS || c.IdleMS > MaxConsultMS || c.TotalMS < MinConsultMS || c.TotalMS > MaxConsultMS:
		return fmt.Errorf("idle_ms and total_ms must be between %d and %d", MinConsultMS, MaxConsultMS)
	case c.IdleMS > c.TotalMS:
		return errors.New("idle_ms must not exceed total_ms")
	}
	return nil
}
