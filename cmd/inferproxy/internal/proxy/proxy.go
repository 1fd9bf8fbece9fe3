// Package proxy is inferproxy: it lets loopd, which has no network, reach
// llama-server.
//
// Invariant: inferproxy copies bytes between infer.sock and one fixed TCP
// upstream, and does nothing else. It parses nothing that crosses it and
// logs nothing about it: only its own start, stop and refusals. It holds
// no credential. A compromised loopd can therefore send llama-server any
// bytes (accepted in the threat model), but cannot reach any other
// address through this role.
package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/daemon"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/inferproxy"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// Run serves until ctx is cancelled.
func Run(ctx context.Context, log *slog.Logger, cfg inferproxy.Config) error {
	ln, err := sockets.Listen(sockets.Config{
		Dir: cfg.SocketDir, Name: wire.Infer.Name,
		AllowUIDs: cfg.AllowUIDs, AllowGIDs: cfg.AllowGIDs,
		MaxConns:    cfg.MaxConns,
		IdleTimeout: cfg.Idle(),
		Logger:      log,
	})
	if err != nil {
		return daemon.Refuse(err)
	}
	defer ln.Close()
	log.Info("serving", "socket", ln.Path(), "upstream", cfg.Upstream)
	p := &proxy{cfg: cfg, log: log, bucket: newBucket(cfg.AcceptsPerSec, cfg.AcceptBurst, time.Now)}
	return ln.Serve(ctx, p.serve)
}

type proxy struct {
	cfg    inferproxy.Config
	log    *slog.Logger
	bucket *bucket
}

func (p *proxy) serve(ctx context.Context, _ sockets.Peer, c net.Conn) {
	if !p.bucket.take() {
		p.log.Warn("connection refused: over the accept rate; see docs/runbook.md#infer-rate-limited", "accepts_per_sec", p.cfg.AcceptsPerSec)
		return
	}
	d := net.Dialer{Timeout: p.cfg.DialTimeout()}
	up, err := d.DialContext(ctx, "tcp", p.cfg.Upstream)
	if err != nil {
		p.log.Warn("upstream unreachable; see docs/runbook.md#infer-upstream-down", "upstream", p.cfg.Upstream, "err", err.Error())
		return
	}
	defer up.Close()
	splice(ctx, c, up, p.cfg.Idle())
}

// splice copies both ways until both directions end, either fails, ctx is
// cancelled, or neither direction moves a byte for idle. A byte in either
// direction keeps both alive: a long streamed answer is not cut off just
// because loopd has nothing more to send.
func splice(ctx context.Context, a, b net.Conn, idle time.Duration) {
	touch := func() {
		t := time.Now().Add(idle)
		a.SetDeadline(t)
		b.SetDeadline(t)
	}
	touch()
	stop := context.AfterFunc(ctx, func() { a.Close(); b.Close() })
	defer stop()
	var wg sync.WaitGroup
	var once sync.Once
	abort := func() { once.Do(func() { a.Close(); b.Close() }) }
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				touch()
				if _, werr := dst.Write(buf[:n]); werr != nil {
					abort()
					return
				}
			}
			if errors.Is(err, io.EOF) {
				// Pass the half-close on: HTTP/1.1 clients may
				// shut their side once the request is sent.
				if cw, ok := dst.(interface{ CloseWrite() error }); ok {
					cw.CloseWrite()
				}
				return
			}
			if err != nil {
				abort()
				return
			}
		}
	}
	wg.Add(2)
	go pipe(b, a)
	go pipe(a, b)
	wg.Wait()
}

// bucket is a token bucket: a burst of size burst, refilled at rate per
// second. It limits how fast new connections are accepted, so that a
// looping client cannot hammer the shared llama-server with connections.
type bucket struct {
	mu     sync.Mutex // guards tokens and last
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
	now    func() time.Time
}

func newBucket(rate, burst int, now func() time.Time) *bucket {
	return &bucket{rate: float64(rate), burst: float64(burst), tokens: float64(burst), last: now(), now: now}
}

func (b *bucket) take() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.now()
	b.tokens = min(b.burst, b.tokens+t.Sub(b.last).Seconds()*b.rate)
	b.last = t
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
