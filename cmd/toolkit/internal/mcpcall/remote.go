package mcpcall

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"wntrmute.dev/boxmaker/cmd/toolkit/internal/socks5"
	"wntrmute.dev/boxmaker/pkg/tool/mcppin"
)

// A remote (Streamable HTTP) server is spoken to by this toolkit itself,
// in brokerd's tool image: the official SDK's StreamableClientTransport
// over an http.Client that
//
//   - dials only the URL's host on port 443, and only through the call's
//     egress proxy (SOCKS5 over its Unix socket), which alone decides
//     whether that host may be reached (the granted host, public
//     addresses); there is no other network in the container;
//   - verifies the server's certificate against Env.RootCAs (the tool
//     image's CA bundle; TLS 1.2 at least, end to end, from this process);
//   - follows no redirect (the bearer secret goes to the declared URL and
//     nowhere else);
//   - sends the declaration's secret, when it names one, as
//     "Authorization: Bearer <secret>" and nothing else of it;
//   - opens no standalone SSE stream (the client accepts no request from
//     the server: no sampling, elicitation or roots) and never retries;
//   - reads at most maxResponse bytes of any one response.

// remoteWait bounds TLS handshakes and response headers; the call's own
// context (the runner's time limit) bounds the rest.
const remoteWait = 30 * time.Second

// remoteTransport is the SDK transport to call's URL.
func remoteTransport(env Env, call mcppin.Call) (mcp.Transport, error) {
	u, err := mcppin.ParseRemoteURL(call.URL)
	if err != nil {
		return nil, err
	}
	if env.EgressSocket == "" {
		return nil, errors.New("the container has no network: a remote server's grant must name its host (" + u.Host().String() + "); see docs/runbook.md#mcp-remote-host")
	}
	token := env.Bearer
	if env.HasBearer && !validToken(token) {
		return nil, errors.New("the server's secret is empty or holds a control character, so it cannot be sent as a bearer token; see docs/runbook.md#mcp-remote-host")
	}
	target := net.JoinHostPort(u.Host().String(), "443")
	tr := &http.Transport{
		Proxy: nil, // never the environment's
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr != target {
				return nil, fmt.Errorf("dial %s refused: this call reaches %s only", addr, target)
			}
			return socks5.Dial(ctx, env.EgressSocket, u.Host().String(), 443)
		},
		TLSClientConfig:        &tls.Config{RootCAs: env.RootCAs, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    remoteWait,
		ResponseHeaderTimeout:  remoteWait,
		MaxResponseHeaderBytes: 64 << 10,
	}
	client := &http.Client{
		Transport: bearer{token: token, next: tr},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return errors.New("the server redirected: a remote MCP server's calls follow no redirect")
		},
	}
	return &mcp.StreamableClientTransport{Endpoint: u.String(), HTTPClient: client, MaxRetries: -1,
		DisableStandaloneSSE: true, MaxEventSize: mcppin.MaxResult}, nil
}

// validToken: a header value of printable ASCII and spaces, not empty.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return true
}

// bearer adds the secret to every request of the session.
type bearer struct {
	token string
	next  http.RoundTripper
}

// maxResponse caps each HTTP response body a remote server sends: room
// for a full listing (mcppin.MaxResult) escaped in JSON several times over,
// but not the container's whole memory.
const maxResponse = 4 * mcppin.MaxResult

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	resp, err := b.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &cappedBody{ReadCloser: resp.Body, left: maxResponse}
	return resp, nil
}

// cappedBody fails a read past its cap instead of reading on.
type cappedBody struct {
	io.ReadCloser
	left int64
}

var errTooLong = fmt.Errorf("the server's response is over %d bytes", maxResponse)

func (c *cappedBody) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errTooLong
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.ReadCloser.Read(p)
	c.left -= int64(n)
	return n, err
}
