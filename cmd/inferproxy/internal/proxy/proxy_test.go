package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/inferproxy"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

func TestExampleConfigLoads(t *testing.T) {
	c, _, err := inferproxy.Load("../../../../deploy/inferproxy.toml", "/var/lib/boxmaker")
	if err != nil {
		t.Fatalf("deploy/inferproxy.toml: %v", err)
	}
	if c.Upstream != "127.0.0.1:8080" || c.Idle() != 15*time.Minute || c.MaxConns != 8 {
		t.Errorf("example config = %+v", c)
	}
}

func TestConfigRefusals(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    inferproxy.Config
		want string
	}{
		{"no port", inferproxy.Config{SocketDir: "/run", Upstream: "localhost"}, "host:port"},
		{"no host", inferproxy.Config{SocketDir: "/run", Upstream: ":8080"}, "host:port"},
		{"bad port", inferproxy.Config{SocketDir: "/run", Upstream: "h:99999"}, "1..65535"},
		{"named port", inferproxy.Config{SocketDir: "/run", Upstream: "h:http"}, "1..65535"},
		{"negative", inferproxy.Config{SocketDir: "/run", Upstream: "h:1", MaxConns: -1}, "max_conns"},
		{"negative timeout", inferproxy.Config{SocketDir: "/run", Upstream: "h:1", IdleTimeoutMS: -1}, "negative"},
	} {
		if _, err := tt.c.WithDefaults(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: WithDefaults = %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestBucket(t *testing.T) {
	now := time.Unix(0, 0)
	b := newBucket(2, 3, func() time.Time { return now })
	for i := range 3 {
		if !b.take() {
			t.Fatalf("take #%d refused within the burst", i)
		}
	}
	if b.take() {
		t.Fatal("take past the burst allowed")
	}
	now = now.Add(500 * time.Millisecond) // one token at 2/s
	if !b.take() || b.take() {
		t.Error("refill after 500ms at 2/s should allow exactly one")
	}
	now = now.Add(time.Hour)
	n := 0
	for b.take() {
		n++
	}
	if n != 3 {
		t.Errorf("after a long pause %d takes allowed, want the burst of 3", n)
	}
}

type harness struct {
	sock string
	stop func()
}

func start(t *testing.T, cfg inferproxy.Config) harness {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "infer")
	if err := sockets.MakeDir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg.SocketDir = dir
	cfg, err := cfg.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, slog.New(slog.DiscardHandler), cfg) }()
	sock := filepath.Join(dir, wire.Infer.Name)
	for i := 0; ; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if i > 500 {
			t.Fatal("infer.sock never appeared")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}
	t.Cleanup(func() {
		select {
		case <-ctx.Done():
		default:
			stop()
		}
	})
	return harness{sock: sock, stop: stop}
}

func unixClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
}

// TestStreamOutlastsIdleTimeout streams an answer with gaps shorter than
// the idle timeout for much longer than it: the client sends nothing all
// that time, and the proxy must not cut the stream.
func TestStreamOutlastsIdleTimeout(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		// 1 s in all, gaps of 50 ms against a 300 ms limit: a six-fold
		// margin, so a loaded machine cannot fail it.
		for i := range 20 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond)
		}
		io.WriteString(w, "data: [DONE]\n\n")
	})
	h := start(t, inferproxy.Config{Upstream: up, IdleTimeoutMS: 300})
	resp, err := unixClient(h.sock).Post("http://llama/v1/chat/completions", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var events int
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			events++
		}
	}
	if err := sc.Err(); err != nil || events != 21 {
		t.Errorf("got %d events, err %v; want 21 through the proxy", events, err)
	}
}

// TestIdleConnectionClosed: an upstream that never answers is cut off
// after the idle timeout.
func TestIdleConnectionClosed(t *testing.T) {
	release := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { <-release })
	defer close(release)
	h := start(t, inferproxy.Config{Upstream: up, IdleTimeoutMS: 150})
	c, err := net.Dial("unix", h.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("read on an idle proxied connection = %v, want EOF from the proxy", err)
	}
}

func TestUpstreamDownClosesConnection(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	h := start(t, inferproxy.Config{Upstream: addr})
	_, err := unixClient(h.sock).Get("http://llama/health")
	if err == nil {
		t.Error("request through a proxy with no upstream succeeded")
	}
}

func TestAcceptRateLimit(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	h := start(t, inferproxy.Config{Upstream: up, AcceptsPerSec: 1, AcceptBurst: 2})
	var ok, refused int
	for range 4 {
		c, err := net.Dial("unix", h.sock)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(c)
		c.Close()
		if strings.Contains(string(b), "200 OK") {
			ok++
		} else {
			refused++
		}
	}
	if ok != 2 || refused != 2 {
		t.Errorf("with a burst of 2: %d served, %d refused; want 2 and 2", ok, refused)
	}
}

func TestStopRemovesSocket(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
	h := start(t, inferproxy.Config{Upstream: up})
	h.stop()
	if _, err := os.Stat(h.sock); !os.IsNotExist(err) {
		t.Errorf("infer.sock still there after stop: %v", err)
	}
}

func newUpstream(t *testing.T, f http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: f}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}
