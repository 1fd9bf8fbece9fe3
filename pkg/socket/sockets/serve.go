package sockets

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

// Serve accepts connections until ctx is cancelled, then closes the
// listener, closes every open connection and waits for the handlers to
// return. Cancellation is the normal way to stop and returns nil.
func (l *Listener) Serve(ctx context.Context, h Handler) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex // guards conns
		conns = map[net.Conn]struct{}{}
	)
	stop := context.AfterFunc(ctx, func() {
		l.ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	defer stop()
	defer wg.Wait()
	slots := make(chan struct{}, l.cfg.MaxConns)
	log := l.cfg.Logger.With("socket", l.path)
	var backoff time.Duration
	for {
		// Wait for a free slot before accepting: connections past the
		// cap wait in the kernel's backlog rather than in our memory.
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		uc, err := l.ln.AcceptUnix()
		if err != nil {
			<-slots
			if ctx.Err() != nil {
				return nil
			}
			if exhausted(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				log.Warn("accept paused: out of resources", "err", err, "retry_in", backoff)
				select {
				case <-time.After(backoff):
				case <-ctx.Done():
					return nil
				}
				continue
			}
			return err
		}
		backoff = 0
		peer, err := peerOf(uc)
		if err != nil || !l.allowed(peer) {
			log.Warn("peer refused", "uid", peer.uid, "gid", peer.gid, "pid", peer.pid, "err", err)
			uc.Close()
			<-slots
			continue
		}
		c := &deadlineConn{UnixConn: uc, idle: l.cfg.IdleTimeout}
		mu.Lock()
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			defer func() {
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
				c.Close()
			}()
			h(ctx, peer, c)
		}()
	}
}

// exhausted reports the accept errors that mean "try again later": the
// process or system is out of descriptors, buffers or memory.
func exhausted(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// deadlineConn sets a fresh deadline before every read and write, so a
// peer that stops talking is cut off after the idle timeout.
type deadlineConn struct {
	*net.UnixConn
	idle time.Duration
}

func (c *deadlineConn) Read(p []byte) (int, error) {
	if err := c.UnixConn.SetReadDeadline(time.Now().Add(c.idle)); err != nil {
		return 0, err
	}
	return c.UnixConn.Read(p)
}

func (c *deadlineConn) Write(p []byte) (int, error) {
	if err := c.UnixConn.SetWriteDeadline(time.Now().Add(c.idle)); err != nil {
		return 0, err
	}
	return c.UnixConn.Write(p)
}
