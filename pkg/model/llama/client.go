package llama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults. The sampling values are sent with every request because the
// server's own default temperature is 1.0 (design brief, inference contract
// 10). The limits are the owner's M2a choices (decisions.md, 2026-09-17).
const (
	DefaultTemperature      = 0.6
	DefaultTopP             = 0.95
	DefaultTopK             = 20
	DefaultThinkingCap      = 4096
	DefaultMaxTokens        = 8192
	DefaultFirstByteTimeout = 10 * time.Minute
	DefaultModelLoadTimeout = 3 * time.Minute
	DefaultIdleTimeout      = 30 * time.Second
	DefaultMaxEventBytes    = 4 << 20
)

// socketBase is the URL used when requests go over a Unix socket. The dialer
// ignores it; the ".invalid" name (RFC 6761) makes sure a request that somehow
// escaped the socket dialer could never resolve to a real host.
const socketBase = "http://llama-server.invalid"

// maxBodyBytes caps a non-streaming response body. /props carries the chat
// template and UI settings (tens of KiB); anything near this cap is hostile.
const maxBodyBytes = 16 << 20

// Sampling holds the sampling parameters sent with every completion.
type Sampling struct {
	Temperature float64
	TopP        float64
	TopK        int
}

// DefaultSampling is what a nil [Config.Sampling] means.
var DefaultSampling = Sampling{Temperature: DefaultTemperature, TopP: DefaultTopP, TopK: DefaultTopK}

// Config describes one client: one server, one model, one slot. Zero values
// mean the defaults above; negative durations and sizes are refused.
type Config struct {
	// Exactly one of BaseURL and SocketPath is set. BaseURL is an http or
	// https URL, optionally with a path prefix (bxctl selftest). SocketPath
	// is inferproxy's socket (loopd); requests then carry a placeholder host.
	BaseURL    string
	SocketPath string

	// Model is the model name or alias. Required: in router mode the router
	// routes POST bodies on "model" and GETs on ?model= (reference:
	// server-models.cpp:1801-1818); a single-model server ignores it.
	Model string

	// IDSlot is the slot every completion is pinned to; -1 lets the server
	// choose, which only the self-test should do: moving a session to
	// another slot costs a full prompt re-read.
	IDSlot int

	Sampling *Sampling // nil: DefaultSampling

	// ThinkingCap is the number of reasoning tokens after which the client
	// asks the server to end the thinking block; 0 means
	// DefaultThinkingCap and a negative value turns the cap off.
	ThinkingCap int
	// MaxTokens is max_tokens, the backstop behind the thinking cap.
	MaxTokens int

	// FirstByteTimeout bounds the wait for the first byte while the slot is
	// busy with another request (the server queues the request and sends
	// nothing: reference "observed live", busy slot).
	FirstByteTimeout time.Duration
	// ModelLoadTimeout bounds the wait for the first byte while the model
	// is being loaded (or the wait cannot be explained by a busy slot).
	// See [Client.Complete] for how the two waits are told apart.
	ModelLoadTimeout time.Duration
	// IdleTimeout is the longest silence allowed once bytes have started
	// arriving. There is never a limit on a completion's total time.
	IdleTimeout time.Duration

	// MaxEventBytes caps one SSE line and one event's data.
	MaxEventBytes int
}

// Client talks to one llama-server. It is safe for concurrent use. The
// caller owns the conversation's state and passes a [SlotState] to each
// completion; the client keeps only the encoding of the last request's
// messages, so that a request extending it encodes only what is new (the
// bytes sent are those of a full encoding in every case).
type Client struct {
	base        string // URL prefix without a trailing slash
	http        *http.Client
	model       string
	slot        int
	sampling    Sampling
	thinkingCap int // 0: no cap
	cache       bodyCache
	maxTokens   int
	firstByte   time.Duration
	modelLoad   time.Duration
	idle        time.Duration
	maxEvent    int
}

// New checks cfg and returns a client for it.
func New(cfg Config) (*Client, error) {
	return newClient(cfg, nil)
}

// newClient is New with an optional transport, so tests and benchmarks can
// replay canned streams in memory.
func newClient(cfg Config, rt http.RoundTripper) (*Client, error) {
	c := &Client{
		model:       cfg.Model,
		slot:        cfg.IDSlot,
		sampling:    DefaultSampling,
		thinkingCap: cfg.ThinkingCap,
		maxTokens:   cfg.MaxTokens,
		firstByte:   cfg.FirstByteTimeout,
		modelLoad:   cfg.ModelLoadTimeout,
		idle:        cfg.IdleTimeout,
		maxEvent:    cfg.MaxEventBytes,
	}
	if cfg.Model == "" {
		return nil, errors.New("configure llama client: model is required")
	}
	if cfg.IDSlot < -1 {
		return nil, fmt.Errorf("configure llama client: id_slot %d is below -1", cfg.IDSlot)
	}
	if cfg.Sampling != nil {
		s := *cfg.Sampling
		// NaN and infinities cannot be encoded as JSON; the server clamps
		// everything else (reference: server-schema.cpp:89-119).
		for _, f := range []float64{s.Temperature, s.TopP} {
			if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
				return nil, fmt.Errorf("configure llama client: sampling value %v is not a finite non-negative number", f)
			}
		}
		if s.TopK < 0 {
			return nil, fmt.Errorf("configure llama client: top_k %d is negative", s.TopK)
		}
		c.sampling = s
	}
	switch {
	case c.thinkingCap == 0:
		c.thinkingCap = DefaultThinkingCap
	case c.thinkingCap < 0:
		c.thinkingCap = 0
	}
	for _, v := range []struct {
		name string
		p    *time.Duration
		def  time.Duration
	}{
		{"first-byte timeout", &c.firstByte, DefaultFirstByteTimeout},
		{"model-load timeout", &c.modelLoad, DefaultModelLoadTimeout},
		{"idle timeout", &c.idle, DefaultIdleTimeout},
	} {
		if *v.p < 0 {
			return nil, fmt.Errorf("configure llama client: %s %v is negative", v.name, *v.p)
		}
		if *v.p == 0 {
			*v.p = v.def
		}
	}
	if c.maxTokens < 0 || c.maxEvent < 0 {
		return nil, errors.New("configure llama client: max tokens and max event bytes must not be negative")
	}
	if c.maxTokens == 0 {
		c.maxTokens = DefaultMaxTokens
	}
	if c.maxEvent == 0 {
		c.maxEvent = DefaultMaxEventBytes
	}

	tr := &http.Transport{
		// Never honour HTTP_PROXY and friends: the only peer is the one
		// configured server, and prompts must not leave through a proxy
		// picked up from the environment.
		Proxy: nil,
		// Bytes must reach the liveness timer as the server sends them.
		DisableCompression: true,
		MaxIdleConns:       4,
		IdleConnTimeout:    90 * time.Second,
	}
	switch {
	case (cfg.BaseURL == "") == (cfg.SocketPath == ""):
		return nil, errors.New("configure llama client: set exactly one of base URL and socket path")
	case cfg.SocketPath != "":
		path := cfg.SocketPath
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
		c.base = socketBase
	default:
		u, err := url.Parse(cfg.BaseURL)
		if err != nil {
			return nil, fmt.Errorf("configure llama client: %w", err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("configure llama client: base URL %q must be http(s)://host[:port][/prefix]", cfg.BaseURL)
		}
		tr.DialContext = (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
		c.base = strings.TrimSuffix(u.String(), "/")
	}
	if rt == nil {
		rt = tr
	}
	c.http = &http.Client{
		Transport: rt,
		// A redirect is not part of the protocol; following one could send
		// a prompt somewhere else. The 3xx comes back as a ServerError.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c, nil
}

func (c *Client) url(path string, q url.Values) string {
	if len(q) == 0 {
		return c.base + path
	}
	return c.base + path + "?" + q.Encode()
}

// call does one small JSON request. It has no total deadline either, but the
// server answers these from its HTTP thread, so both liveness phases use the
// idle limit.
func (c *Client) call(ctx context.Context, op, method, path string, q url.Values, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := marshalJSON(in, 0)
		if err != nil {
			return fmt.Errorf("%s: encode request: %w", op, err)
		}
		body = bytes.NewReader(b)
	}
	w, reqCtx := startWatchdog(ctx, op, limits{firstByte: c.idle, modelLoad: c.idle, idle: c.idle})
	defer w.stop()
	req, err := http.NewRequestWithContext(reqCtx, method, c.url(path, q), body)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Close = true // as in Complete: never reuse a connection the server may be closing
	resp, err := c.http.Do(req)
	if err != nil {
		return w.err(fmt.Errorf("%s: %w", op, err))
	}
	defer resp.Body.Close()
	w.gotByte()
	data, err := readCapped(liveReader{resp.Body, w})
	if err != nil {
		return w.err(fmt.Errorf("%s: read response: %w", op, err))
	}
	if resp.StatusCode/100 != 2 {
		return parseErrorBody(op, resp.StatusCode, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s: decode response: %v", op, err)
	}
	return nil
}

// errBodyTooLarge is returned by readCapped.
var errBodyTooLarge = fmt.Errorf("body exceeds %d bytes", maxBodyBytes)

// readCapped reads r to the end, refusing more than maxBodyBytes.
func readCapped(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxBodyBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxBodyBytes {
		return nil, errBodyTooLarge
	}
	return data, nil
}
