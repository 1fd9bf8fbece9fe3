package tools

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
)

// Fetch limits.
const (
	MaxRedirects = 5
	FetchTimeout = 90 * time.Second // under the runner's time limit
)

// fetch GETs the URL through the egress proxy and prints the status
// line, the content type and the body, capped at MaxRead (a longer body
// is cut there, and stderr says so).
func fetch(ctx context.Context, env Env, a toolargs.HTTPFetch) error {
	if err := checkEgress(env); err != nil {
		return err
	}
	tr := egressTransport(env.EgressSocket, env.RootCAs)
	// A GET's answer is due soon after the request; a slow server
	// must not hold the call until FetchTimeout.
	tr.ResponseHeaderTimeout = 30 * time.Second
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
