package tools

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"wntrmute.dev/boxmaker/cmd/toolkit/internal/socks5"
	"wntrmute.dev/boxmaker/pkg/toolargs"
)

// Fetch limits.
const (
	MaxRedirects = 5
	FetchTimeout = 90 * time.Second // under the runner's time limit
)

// NoNetwork is http_fetch's message when the call has no egress proxy.
const NoNetwork = "no network was granted to this call: its grant names no hosts; see docs/runbook.md#egress-refused"

// fetch GETs the URL through the egress proxy and prints the status
// line, the content type and the body, capped at MaxRead (a longer body
// is cut there, and stderr says so).
func fetch(ctx context.Context, env Env, a toolargs.HTTPFetch) error {
	fi, err := os.Stat(env.EgressSocket)
	if errors.Is(err, fs.ErrNotExist) {
		return failf("%s", NoNetwork)
	}
	if err != nil || fi.Mode().Type() != fs.ModeSocket {
		return failf("no network was granted to this call: the egress socket is unusable; see docs/runbook.md#egress-refused")
	}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			n, err := strconv.ParseUint(port, 10, 16)
			if err != nil {
				return nil, err
			}
			return socks5.Dial(ctx, env.EgressSocket, host, uint16(n))
		},
		TLSClientConfig:        &tls.Config{RootCAs: env.RootCAs, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    15 * time.Second,
		ResponseHeaderTimeout:  30 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
		DisableKeepAlives:      true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{
		Transport: tr,
		Timeout:   FetchTimeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > MaxRedirects {
				return fmt.Errorf("stopped after %d redirects", MaxRedirects)
			}
			// Only URLs a call could have asked for are followed; the
			// proxy then checks the new host as it checks every dial.
			if _, err := toolargs.ParseURL(req.URL.String()); err != nil {
				return fmt.Errorf("redirect refused: %v", err)
			}
			return nil
		},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.URL.String(), nil)
	if err != nil {
		return failf("fetch: %v", err)
	}
	req.Header.Set("User-Agent", "boxmaker-toolkit/1")
	resp, err := client.Do(req)
	if err != nil {
		return failf("fetch: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxRead+1))
	if err != nil {
		return failf("fetch: reading the body: %v", err)
	}
	truncated := len(body) > MaxRead
	if truncated {
		body = body[:MaxRead]
	}
	fmt.Fprintf(env.Stdout, "%s %s\n", resp.Proto, resp.Status)
	if resp.Request != nil && resp.Request.URL.String() != a.URL.String() {
		fmt.Fprintf(env.Stdout, "Final-URL: %s\n", resp.Request.URL)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		fmt.Fprintf(env.Stdout, "Content-Type: %s\n", ct)
	}
	fmt.Fprintln(env.Stdout)
	if _, err := env.Stdout.Write(body); err != nil {
		return failf("fetch: writing the result: %v", err)
	}
	if truncated {
		fmt.Fprintf(env.Stderr, "body cut at %d bytes\n", MaxRead)
	}
	return nil
}
