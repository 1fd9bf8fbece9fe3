package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/escape"
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
func (c *chat) dial(ctx context.Context) (*rpc.Conn, error) {
	conn, err := rpc.Dial(ctx, &wire.Loop, c.sock)
	if err != nil {
		return nil, fmt.Errorf("%v; start Boxmaker with bxctl up, or pass --state DIR; see docs/runbook.md#loopd-not-running", err)
	}
	return conn, nil
}

// turn sends text as one message and shows the turn's events until the
// one that ends it. It reports whether the turn ended with an answer; an
// error means no turn end was seen (loopd unreachable, the protocol
// broken, or the owner interrupted).
func (c *chat) turn(ctx context.Context, text string) (answered bool, err error) {
	// Ctrl-C ends ctx, which closes the connection: a read that may wait
	// a long time for the model returns.
	conn, err := c.dial(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	defer c.endReasoning()
	end, err := conn.Exchange(&wire.Send{Session: c.session, Text: text}, func(ev strict.Variant) error {
		_, err := c.event(ev)
		return err
	})
	var refused *wire.Error
	switch {
	case ctx.Err() != nil:
		return false, errInterrupted
	case errors.As(err, &refused):
		end = refused // shown like any event that ends a turn
	case err != nil:
		return false, fmt.Errorf("protocol error: %v", err)
	}
	answered, err = c.event(end)
	if err != nil {
		return false, fmt.Errorf("protocol error: %v", err)
	}
	return answered, nil
}

// event checks that ev is for this chat's session and shows it,
// reporting whether it is an answer.
func (c *chat) event(ev strict.Variant) (answered bool, err error) {
	if s, ok := sessionOf(ev); ok && s != c.session {
		return false, fmt.Errorf("loopd sent an event for session %q, not %q (%s)", s, c.session, ev.Tag())
	}
	_, answered = c.show(ev)
	return answered, nil
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
		fmt.Fprintf(c.stdout, "[approval %d: a call to %s waits for you; review it with bxctl approvals %d, which shows its code, and answer with: bxctl approve %d CODE]\n", e.ID, escape.Line(e.Tool), e.ID, e.ID)
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
