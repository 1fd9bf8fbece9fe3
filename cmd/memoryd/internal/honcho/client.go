package honcho

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd/honchoconf"
	"wntrmute.dev/boxmaker/pkg/host/secret"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

// MaxResponse caps a response body: a full batch of [MaxBatch] messages of
// [MaxContent] characters, four bytes each, fits with room to spare for
// JSON escapes; anything larger is refused unread.
const MaxResponse = 32 << 20

// ErrUnreachable wraps a request that got no answer: a refused
// connection, a TLS failure, a timeout or a body cut short.
var ErrUnreachable = errors.New("honcho: not reachable")

// Client talks to one Honcho. It is safe for concurrent use.
type Client struct {
	base    *url.URL
	key     secret.Value
	timeout time.Duration
	http    *http.Client
}

// New makes a client for s. key is the secret s.Key names (zero when s
// has no key); [Open] loads it from the secret store.
func New(s honchoconf.Settings, key secret.Value) (*Client, error) {
	if s.URL == nil || s.Timeout <= 0 {
		return nil, errors.New("new honcho client: settings not from Parse")
	}
	if s.HasKey() == key.IsZero() {
		return nil, errors.New("new honcho client: a key must be given exactly when the settings name one")
	}
	tr := &http.Transport{
		// No proxy from the environment: the egress table names Honcho
		// as memoryd's one destination.
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: s.Timeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   s.Timeout,
		ResponseHeaderTimeout: s.Timeout,
		MaxIdleConns:          4,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &Client{
		base:    s.URL,
		key:     key,
		timeout: s.Timeout,
		http: &http.Client{
			Transport: tr,
			// A redirect would carry the key and the turns elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// Open loads s's key, if any, from st and makes a client.
func Open(s honchoconf.Settings, st *secret.Store) (*Client, error) {
	var key secret.Value
	if s.HasKey() {
		v, err := st.Load(s.Key)
		if err != nil {
			return nil, fmt.Errorf("open honcho client: %w", err)
		}
		key = v
	}
	return New(s, key)
}

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// do sends one request and returns the status and body of a response
// whose status is one of want; any other status is an [*APIError].
func (c *Client) do(ctx context.Context, op, method string, path []string, in any, want ...int) (int, []byte, error) {
	return c.doURL(ctx, op, method, c.base.JoinPath(path...), in, want...)
}

// doURL is [Client.do] to a URL that may carry a query.
func (c *Client) doURL(ctx context.Context, op, method string, u *url.URL, in any, want ...int) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var body io.Reader
	if in != nil {
		b, err := strict.Marshal(in)
		if err != nil {
			return 0, nil, fmt.Errorf("%s: %w", op, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", op, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if !c.key.IsZero() {
		req.Header.Set("Authorization", "Bearer "+c.key.Reveal())
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w: %v", op, ErrUnreachable, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponse+1))
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w: reading the answer: %v", op, ErrUnreachable, err)
	}
	if len(b) > MaxResponse {
		return 0, nil, fmt.Errorf("%s: %w: the answer is over %d bytes", op, ErrUndecodable, MaxResponse)
	}
	if !slices.Contains(want, resp.StatusCode) {
		return 0, nil, DecodeError(op, resp.StatusCode, b)
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return 0, nil, fmt.Errorf("%s: %w: content type %q, want application/json", op, ErrUndecodable, resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode, b, nil
}

// Health asks GET /health (src/main.py health_check), which needs no key.
func (c *Client) Health(ctx context.Context) error {
	_, b, err := c.do(ctx, "honcho health", http.MethodGet, []string{"health"}, nil, http.StatusOK)
	if err != nil {
		return err
	}
	return DecodeHealth(b)
}
