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
)

// NoNetwork is http_fetch's message when the call has no egress proxy.
const NoNetwork = "no network was granted to this call: its grant names no hosts; see docs/runbook.md#egress-refused"

// checkEgress refuses a call whose container has no usable egress
// socket: without it the call was granted no network.
func checkEgress(env Env) error {
	fi, err := os.Stat(env.EgressSocket)
	if errors.Is(err, fs.ErrNotExist) {
		return failf("%s", NoNetwork)
	}
	if err != nil || fi.Mode().Type() != fs.ModeSocket {
		return failf("no network was granted to this call: the egress socket is unusable; see docs/runbook.md#egress-refused")
	}
	return nil
}

// egressTransport is the one way http_fetch and consult reach the
// network: every dial is its own SOCKS5 connection through the egress
// proxy's Unix socket (so the proxy checks every host, a redirect's
// too), with TLS verified here against roots (nil: the system's), and
// no connection kept between requests.
func egressTransport(socket string, roots *x509.CertPool) *http.Transport {
	return &http.Transport{
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
			return socks5.Dial(ctx, socket, host, uint16(n))
		},
		TLSClientConfig:        &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    15 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
		DisableKeepAlives:      true,
	}
}
