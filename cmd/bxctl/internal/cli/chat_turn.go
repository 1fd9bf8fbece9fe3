package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"strings"
	"syscall"
	"time"

	"wntrmute.dev/boxmaker/pkg/escape"
	"wntrmute.dev/boxmaker/pkg/frame"
	"wntrmute.dev/boxmaker/pkg/sockets"
	"wntrmute.dev/boxmaker/pkg/strict"
	"wntrmute.dev/boxmaker/pkg/wire"
)

// SGR sequences for the model's reasoning, written only to a terminal.
const (
	sgrDim   = "\x1b[2m"
	sgrReset = "\x1b[0m"
)

// errInterrupted: the owner pressed Ctrl-C while a turn ran. The message
// was sent; loopd carries on with the turn.
var errInterrupted = errors.New("interrupted; the turn goes on in loopd")

// chat is one bxctl chat run: where loopd is, the session, and how to
// show a turn.
type chat struct {
	sock    string
	session string
	json    bool // print events as JSON lines instead of showing them
	tty     bool // stdout is a terminal: dim reasoning, show a prompt
	stdout  io.Writer
	stderr  io.Writer

	reasoning bool // a run of reasoning fragments is being shown
	lineStart bool // the last reasoning written ended a line
}

// dial connects to loopd, saying so plainly when nothing listens.
func (c *chat) dial(ctx context.Context) (*net.UnixConn, error) {
	conn, err := sockets.Dial(ctx, c.sock)
	if err == nil {
		return conn, nil
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
		return nil, fmt.Errorf("loopd is not running (nothing listens on %s); start Boxmaker with bxctl up, or pass --state DIR; see docs/runbook.md#loopd-not-running", c.sock)
	}
	return nil, fmt.Errorf("cannot reach loopd: %v", err)
}

// turn sends text as one message and shows the turn's events until the
// one that ends it. It reports whether the turn ended with an answer; an
// error means no turn end was seen (loopd unreachable, the protocol
// broken, or the owner interrupted).
func (c *chat) turn(ctx context.Context, text string) (answered bool, err error) {
	conn, err := c.dial(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	// Ctrl-C unblocks a read that may wait a long time for the model.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	defer c.endReasoning()

	req, err := wire.LoopRequests.Encode(&wire.Send{Session: c.session, Text: text})
	if err != nil {
		return false, fmt.Errorf("encode message: %v", err)
	}
	if err := frame.Write(conn, req, wire.LoopFrameMax); err != nil {
		if ctx.Err() != nil {
			return false, errInterrupted
		}
		return false, fmt.Errorf("send to loopd: %v", err)
	}
	for {
		body, err := frame.Read(conn, wire.LoopFrameMax)
		if err != nil {
			if ctx.Err() != nil {
				return false, errInterrupted
			}
			if errors.Is(err, io.EOF) {
				return false, errors.New("protocol error: loopd closed the connection before the turn ended")
			}
			return false, fmt.Errorf("protocol error: %v", err)
		}
		ev, err := wire.LoopEvents.Decode(body)
		if err != nil {
			return false, fmt.Errorf("protocol error: loopd sent an event bxctl cannot read: %v", err)
		}
		if s, ok := sessionOf(ev); ok && s != c.session {
			return false, fmt.Errorf("protocol error: loopd sent an event for session %q, not %q (%s)", s, c.session, ev.Tag())
		}
		if end, answered := c.show(ev); end {
			return answered, nil
		}
	}
}

// sessionOf is the session an event names; an error names none.
func sessionOf(ev strict.Variant) (string, bool) {
	switch e := ev.(type) {
	case *wire.Accepted:
		return e.Session, true
	case *wire.Working:
		return e.Session, true
	case *wire.Reasoning:
		return e.Session, true
	case *wire.ToolRunning:
		return e.Session, true
	case *wire.ApprovalPending:
		return e.Session, true
	case *wire.ToolDenied:
		return e.Session, true
	case *wire.Answer:
		return e.Session, true
	case *wire.Stopped:
		return e.Session, true
	}
	return "", false
}

// show prints one event and reports whether it ends the turn, and if so
// whether with an answer. Every string in an event passes through package
// escape: it is the model's text or loopd's.
func (c *chat) show(ev strict.Variant) (end, answered bool) {
	if c.json {
		// Re-encoding gives the strict wire form on one line;
		// escape.JSON keeps it JSON of the same value while making
		// invisible and control runes visible.
		if b, err := wire.LoopEvents.Encode(ev); err != nil {
			c.fail(fmt.Errorf("encode event: %v", err)) // cannot happen: it was just decoded
		} else {
			fmt.Fprintln(c.stdout, escape.JSON(string(b)))
		}
	}
	if r, ok := ev.(*wire.Reasoning); ok {
		if !c.json {
			c.reason(r.Text)
		}
		return false, false
	}
	c.endReasoning()
	switch e := ev.(type) {
	case *wire.Answer:
		if !c.json {
			text := escape.Text(e.Text)
			fmt.Fprint(c.stdout, text)
			if !strings.HasSuffix(text, "\n") {
				fmt.Fprintln(c.stdout)
			}
		}
		return true, true
	case *wire.Stopped:
		if !c.json {
			fmt.Fprintf(c.stderr, "bxctl chat: the turn was stopped (%s): %s\n", escape.Line(string(e.Reason)), escape.Line(e.Msg))
		}
		return true, false
	case *wire.Error:
		if !c.json {
			fmt.Fprintf(c.stderr, "bxctl chat: loopd answered with an error: %s\n", escape.Line(e.Error()))
		}
		return true, false
	}
	if c.json {
		return false, false
	}
	switch e := ev.(type) {
	case *wire.Accepted:
		if e.Queued {
			fmt.Fprintln(c.stdout, "[queued: a turn is running in this session; the message goes into the next one]")
		}
	case *wire.ToolRunning:
		fmt.Fprintf(c.stdout, "[tool %s running]\n", escape.Line(e.Tool))
	case *wire.ApprovalPending:
		fmt.Fprintf(c.stdout, "[approval %d: a call to %s waits for you; review and answer it with: bxctl approve %d]\n", e.ID, escape.Line(e.Tool), e.ID)
	case *wire.ToolDenied:
		fmt.Fprintf(c.stdout, "[tool %s denied: %s]\n", escape.Line(e.Tool), escape.Line(e.Reason))
	}
	return false, false
}

// reason shows a reasoning fragment as it arrives, dimmed on a terminal.
// Each fragment is escaped on its own, so a combining mark that starts a
// fragment shows as an escape: its base is already on the screen.
func (c *chat) reason(text string) {
	if !c.reasoning {
		c.reasoning, c.lineStart = true, true
		if c.tty {
			fmt.Fprint(c.stdout, sgrDim)
		}
	}
	t := escape.Text(text)
	if t != "" {
		fmt.Fprint(c.stdout, t)
		c.lineStart = strings.HasSuffix(t, "\n")
	}
}

// endReasoning closes a run of reasoning: reset the dim, end the line.
func (c *chat) endReasoning() {
	if !c.reasoning {
		return
	}
	c.reasoning = false
	if c.tty {
		fmt.Fprint(c.stdout, sgrReset)
	}
	if !c.lineStart {
		fmt.Fprintln(c.stdout)
	}
}
