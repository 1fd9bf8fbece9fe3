package runner

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/containers/podman/v5/pkg/bindings/containers"
)

// attachRun attaches to a created container, starts it, feeds it stdin,
// and waits for it to exit, stopping it when it passes its time limit or
// prints past a cap. started is called once the container has started
// (its mounts are made) and before the tool gets its input; an error
// from it fails the call. The caller removes it.
func (p *Podman) attachRun(conn context.Context, id string, stdin []byte, timeout time.Duration, started func() error, t0 *time.Time) (Output, error) {
	// The answer to the attach is the signal that the container may
	// start: Podman has prepared it and holds conmon's attach socket.
	st, err := p.attach(conn, id, true)
	if err != nil {
		return Output{}, fail(ErrPodman, fmt.Sprintf("attach: %v", err))
	}
	defer st.Close()
	p.mark("attach", t0)
	stop := make(chan string, 2)
	over := func() {
		select {
		case stop <- StopOutput:
		default:
		}
	}
	stdout, stderr := newCapped(p.cfg.StdoutCap, over), newCapped(p.cfg.StderrCap, over)
	streamed := make(chan error, 1)
	go func() { streamed <- demux(st.r, stdout, stderr) }()
	if err := containers.Start(conn, id, nil); err != nil {
		return Output{}, requestFailed(conn, "start", err)
	}
	if err := started(); err != nil {
		p.kill(conn, id)
		return Output{}, err
	}
	// The input goes in only now; closing the stream (deferred) ends a
	// write the container no longer reads.
	go st.feed(stdin)
	p.mark("start", t0)
	// Wait is asked only when the stream cannot settle the call: it
	// answers when conmon exits, after Podman's cleanup process (a new
	// podman process: tens of ms), and a request left waiting through
	// the removal costs the service a lock and lookups on every call.
	// It ends with the call.
	var waited chan result // nil (never ready) until asked
	waitCtx, endWait := context.WithCancel(conn)
	defer endWait()
	askWait := func() {
		if waited != nil {
			return
		}
		waited = make(chan result, 1)
		go func(c chan<- result) {
			// Podman waits on conmon's pidfd; the interval only bounds
			// how often it looks at the context.
			code, err := containers.Wait(waitCtx, id, new(containers.WaitOptions).WithInterval("20ms"))
			c <- result{code: code, err: err}
		}(waited)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var stopped string
	var w result
	ended := (<-chan error)(streamed) // nil once the stream has ended
	var recheck <-chan time.Time      // the next look for the exit code
	pause := exitPause
wait:
	for {
		select {
		case w = <-waited:
			break wait
		case <-recheck:
			recheck = nil
			if code, oom, ok := p.exited(conn, id); ok {
				w = result{code: code, inspected: true, oom: oom}
				break wait
			}
			if pause *= 2; pause <= exitPauseMax {
				recheck = time.After(pause)
			}
		case err := <-ended:
			ended = nil
			if err != nil {
				// What the container printed after this point is lost,
				// and the output cannot be passed off as whole.
				p.kill(conn, id)
				return Output{}, fail(ErrPodman, fmt.Sprintf("attach: %v", err))
			}
			// conmon closes the attach sockets once the container has
			// exited and its output is drained, and only then writes
			// the exit code (containers/conmon v2.1.6, src/conmon.c
			// lines 453-503): an inspect has it as soon as it is
			// written, which a quick inspect can beat (about one call
			// in four here). So look again a few times, briefly, while
			// Wait decides if the code never comes (the stream ended
			// with the container still running: the service went away).
			if code, oom, ok := p.exited(conn, id); ok {
				w = result{code: code, inspected: true, oom: oom}
				break wait
			}
			askWait()
			recheck = time.After(pause)
		case <-timer.C:
			stopped = first(stopped, fmt.Sprintf("%s of %d s", StopTime, int(timeout.Seconds())))
			p.kill(conn, id)
			askWait()
		case why := <-stop:
			stopped = first(stopped, why)
			p.kill(conn, id)
			askWait()
		case <-conn.Done():
			// brokerd is stopping or loopd gave up: nobody will read the
			// output. The caller's remove kills it.
			return Output{}, fail(ErrPodman, fmt.Sprintf("the call was cancelled: %v", conn.Err()))
		}
	}
	if w.err != nil {
		return Output{}, requestFailed(conn, "wait", w.err)
	}
	if w, err = confirmWait(w, func() (int32, bool, bool) { return p.exited(conn, id) }); err != nil {
		p.kill(conn, id)
		return Output{}, err
	}
	p.mark("run and wait", t0)
	if ended != nil {
		// Wait answered first: the streams end once conmon has flushed
		// them.
		select {
		case err := <-ended:
			if err != nil {
				return Output{}, fail(ErrPodman, fmt.Sprintf("attach: %v", err))
			}
		case <-time.After(drainWait):
			p.log.Warn("a tool container's output did not end after it exited", "id", id)
		}
	}
	p.mark("drain output", t0)
	// confirmWait has made every code an inspect's, OOM flag included.
	if stopped == "" && w.code == 137 && w.oom {
		stopped = StopMemory
	}
	return Output{Stdout: stdout.String(), Stderr: stderr.String(), Exit: int(w.code), Stopped: stopped}, nil
}

// result is how a tool container ended: its exit code, from an inspect
// or from Wait.
type result struct {
	code int32
	// inspected says the code came from an inspect after the output
	// ended, which also said whether the OOM killer stopped it.
	inspected, oom bool
	err            error
}

// confirmWait takes a code that came from Wait (not from an inspect) only
// once an inspect finds the container exited, and then the inspect's
// code: Podman 5.8.2 answers a failed wait with 200 and code 0
// (containers/podman v5.8.2, pkg/api/handlers/utils/containers.go,
// WaitContainerLibpod, which writes the report's code and drops its
// error), so a tool whose conmon died while it ran would otherwise be
// reported as exit 0.
func confirmWait(w result, exited func() (code int32, oom, ok bool)) (result, error) {
	if w.inspected {
		return w, nil
	}
	code, oom, ok := exited()
	if !ok {
		return w, fail(ErrPodman, "Podman's wait answered but the container has not exited (its conmon may have died), so its output cannot be taken as whole")
	}
	return result{code: code, inspected: true, oom: oom}, nil
}

// After the output ends, the exit code is looked for again after
// exitPause, then after twice as long each time, up to exitPauseMax.
const (
	exitPause    = 2 * time.Millisecond
	exitPauseMax = 32 * time.Millisecond
)

// exited inspects a container whose output has ended: its exit code and
// whether the OOM killer stopped it, if it has exited (ok).
func (p *Podman) exited(conn context.Context, id string) (code int32, oom, ok bool) {
	c, err := containers.Inspect(conn, id, nil)
	if err != nil || c.State == nil || c.State.Running || c.State.Status != "exited" && c.State.Status != "stopped" {
		return 0, false, false
	}
	return c.State.ExitCode, c.State.OOMKilled, true
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// kill sends SIGKILL; a container that already exited is not an error.
func (p *Podman) kill(conn context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(conn), 10*time.Second)
	defer cancel()
	containers.Kill(ctx, id, new(containers.KillOptions).WithSignal("KILL"))
}

// capped keeps the first n bytes written to it and discards the rest,
// calling over once when something is discarded. It never fails a write,
// so the attach stream is drained, not broken.
type capped struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	n    int
	over func()
	full bool
}

func newCapped(n int, over func()) *capped { return &capped{n: n, over: over} }

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.n - c.buf.Len(); len(p) > room {
		c.buf.Write(p[:room])
		if !c.full && c.over != nil {
			c.over()
		}
		c.full = true
		return len(p), nil
	}
	c.buf.Write(p)
	return len(p), nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}
