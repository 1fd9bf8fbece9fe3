package tools

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"wntrmute.dev/boxmaker/cmd/toolkit/internal/socks5"
	"wntrmute.dev/boxmaker/pkg/consult"
	"wntrmute.dev/boxmaker/pkg/strict"
	"wntrmute.dev/boxmaker/pkg/toolargs"
	"wntrmute.dev/boxmaker/pkg/toolinput"
	"wntrmute.dev/boxmaker/pkg/truncate"
)

// maxConsultOutput keeps the printed result under the runner's default
// stdout cap (1 MiB), with room for JSON's escapes.
const maxConsultOutput = 900 << 10

// runConsult posts call.Body to call.URL through the egress proxy.
func runConsult(ctx context.Context, env Env, call toolargs.ConsultCall, key *toolinput.Secret) error {
	if key == nil {
		return failf("consult: no API key was granted to this call: its grant names no secret; see docs/runbook.md#consult-failed")
	}
	fi, err := os.Stat(env.EgressSocket)
	if errors.Is(err, fs.ErrNotExist) {
		return failf("%s", NoNetwork)
	}
	if err != nil || fi.Mode().Type() != fs.ModeSocket {
		return failf("no network was granted to this call: the egress socket is unusable; see docs/runbook.md#egress-refused")
	}
	roots := env.RootCAs
	if roots == nil {
		if roots, err = x509.SystemCertPool(); err != nil {
			return failf("consult: the CA bundle could not be read: %v", err)
		}
	}
	roots = withTestRoots(roots)
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
		TLSClientConfig:        &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    15 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
		DisableKeepAlives:      true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr,
		// A POST is never sent twice: a redirect is the endpoint's
		// answer, reported as its status.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	a, xerr := consult.Exchange(ctx, client, call, key.Value.Reveal())
	r := consult.Result{Answer: a}
	if xerr != nil {
		r.Error = xerr.Error()
	}
	out, err := encodeResult(r)
	if err != nil {
		return failf("consult: the result could not be written: %v", err)
	}
	if _, err := env.Stdout.Write(append(out, '\n')); err != nil {
		return failf("consult: writing the result: %v", err)
	}
	if xerr != nil {
		return failf("%s", xerr.Error())
	}
	return nil
}

// encodeResult writes r, halving the reasoning (then the answer) until
// the line fits maxConsultOutput, and saying so.
func encodeResult(r consult.Result) ([]byte, error) {
	for {
		b, err := strict.Marshal(r)
		if err != nil || len(b) <= maxConsultOutput {
			return b, err
		}
		r.Answer.Truncated = true
		if len(r.Answer.Reasoning) > 0 {
			r.Answer.Reasoning, _ = truncate.Bytes(r.Answer.Reasoning, len(r.Answer.Reasoning)/2)
		} else {
			r.Answer.Content, _ = truncate.Bytes(r.Answer.Content, len(r.Answer.Content)/2)
		}
	}
}
