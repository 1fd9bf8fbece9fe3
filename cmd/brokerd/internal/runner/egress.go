package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/containers/podman/v5/pkg/bindings/containers"
)

// egressReady bounds how long the proxy may take to print "ready".
const egressReady = 15 * time.Second

// startEgress starts a call's egress proxy: its own container, with the
// network the tool container lacks, listening on a socket in a fresh
// directory that both containers mount. stop removes the container and
// the directory; the proxy's decisions are logged as they arrive.
func (p *Podman) startEgress(ctx context.Context, hosts []string, timeout uint) (dir string, stop func(), err error) {
	dir, err = os.MkdirTemp(p.work, "egress-")
	if err != nil {
		return "", nil, fail(ErrEgress, err.Error())
	}
	// The proxy runs as 65534 and must create its socket here; only
	// brokerd's user can reach the directory's parent.
	if err := os.Chmod(dir, 0o777); err != nil {
		os.RemoveAll(dir)
		return "", nil, fail(ErrEgress, err.Error())
	}
	conn, err := p.connect(ctx)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	id, err := p.create(conn, p.cfg.egressSpec(p.instance, hosts, dir, timeout))
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	rd := &readyWriter{ready: make(chan struct{})}
	decisions := newDecisionLog(p.log)
	var st *stream
	streamed := make(chan error, 1)
	stop = func() {
		p.remove(conn, id)
		if st != nil {
			select {
			case <-streamed:
			case <-time.After(egressDrain):
			}
			st.Close()
		}
		decisions.Flush()
		os.RemoveAll(dir)
	}
	abort := func(why string) (string, func(), error) {
		stop()
		return "", nil, fail(ErrEgress, why)
	}
	if st, err = p.attach(ctx, id, false); err != nil {
		return abort(fmt.Sprintf("attach: %v", err))
	}
	go func() {
		err := demux(st.r, rd, decisions)
		if err != nil && !errors.Is(err, net.ErrClosed) {
			p.log.Warn("an egress proxy's output stream broke: its later decisions are not logged", "err", err.Error())
		}
		streamed <- err
	}()
	if err := containers.Start(conn, id, nil); err != nil {
		return abort(fmt.Sprintf("start: %v", err))
	}
	select {
	case <-rd.ready:
		return dir, stop, nil
	case err := <-streamed:
		streamed <- err
		return abort("it exited before it was ready")
	case <-time.After(egressReady):
		return abort(fmt.Sprintf("it did not print ready within %v", egressReady))
	case <-ctx.Done():
		return abort(ctx.Err().Error())
	}
}

// readyWriter watches the proxy's stdout for its "ready" line; it keeps
// at most a line's worth and discards the rest.
type readyWriter struct {
	mu    sync.Mutex
	buf   []byte
	once  sync.Once
	ready chan struct{}
}

func (r *readyWriter) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) < 64 {
		r.buf = append(r.buf, p[:min(len(p), 64-len(r.buf))]...)
	}
	if bytes.HasPrefix(r.buf, []byte("ready\n")) {
		r.once.Do(func() { close(r.ready) })
	}
	return len(p), nil
}
