package cli

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"wntrmute.dev/boxmaker/cmd/bxctl/internal/up"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/escape"
)

// chatStdin is where interactive chat reads the owner's lines; tests
// replace it.
var chatStdin io.Reader = os.Stdin

// runChat is `bxctl chat`: talk to Boxmaker through loopd's loop.sock.
//
// With --message it sends one message, shows the turn and exits: 0 when
// the turn ended with an answer; 1 when it was stopped, loopd refused it,
// loopd broke the protocol or is not running. Without it, it reads lines
// from stdin and sends each non-empty one as a message, on a new
// connection each (so that an idle owner or a restarted loopd costs
// nothing), until end of input or Ctrl-C; it exits 1 only when it cannot
// reach loopd or loopd breaks the protocol.
//
// Everything loopd sends is shown through package escape; the only text
// printed unescaped is bxctl's own and, on a terminal, the SGR sequences
// that dim the model's reasoning.
func runChat(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("chat", stderr)
	stateFlag := fs.String("state", "", "Boxmaker's state `DIR`; loopd listens on DIR/run/loop/loop.sock (default $BOXMAKER_STATE, else ./.boxmaker, or "+up.DevRoot+"/state as root)")
	session := fs.String("session", "", "talk in session `ID` (default: a new one, term-<12 hex digits>)")
	message := fs.String("message", "", "send `TEXT` as one message, print the turn and exit")
	asJSON := fs.Bool("json", false, "with --message: print each turn event as one line of JSON")
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "bxctl chat: "+format+"\n", a...)
		fs.Usage()
		return ExitUsage
	}
	switch {
	case fs.NArg() > 0:
		return bad("takes no arguments; send a message with --message TEXT")
	case *asJSON && !set["message"]:
		return bad("--json needs --message")
	}
	state, err := resolveState(*stateFlag)
	if err != nil {
		return bad("%v", err)
	}
	if set["message"] {
		if err := checkMessage(*message); err != nil {
			return bad("--message: %v", err)
		}
	}
	id := *session
	if set["session"] {
		if err := wire.CheckSessionID(id); err != nil {
			return bad("--session: %v", err)
		}
	} else {
		id = newSessionID()
	}
	c := &chat{
		sock:    layout.Socket(state, &wire.Loop),
		session: id,
		json:    *asJSON,
		tty:     ttyOutput(stdout),
		stdout:  stdout,
		stderr:  stderr,
	}
	if set["message"] {
		return c.oneShot(ctx, *message)
	}
	return c.interactive(ctx, chatStdin)
}

// newSessionID names a fresh terminal session. crypto/rand does not fail
// on the systems Go supports (it aborts the program instead).
func newSessionID() string {
	var b [6]byte
	rand.Read(b[:])
	return "term-" + hex.EncodeToString(b[:])
}

// checkMessage refuses what loopd would refuse, before it is sent. A
// message that is not UTF-8 would otherwise be changed silently by the
// JSON encoder.
func checkMessage(s string) error {
	switch {
	case strings.TrimSpace(s) == "":
		return errors.New("the message is empty")
	case len(s) > wire.MaxMessage:
		return fmt.Errorf("the message is %d bytes, over the limit of %d", len(s), wire.MaxMessage)
	case !utf8.ValidString(s):
		return errors.New("the message is not valid UTF-8")
	}
	return nil
}

// oneShot sends one message and maps the turn's end to the exit code.
func (c *chat) oneShot(ctx context.Context, text string) int {
	answered, err := c.turn(ctx, text)
	if err != nil {
		c.fail(err)
		return ExitFailed
	}
	if !answered {
		return ExitFailed
	}
	return ExitOK
}

// interactive runs the read-send-show loop until end of input or Ctrl-C.
func (c *chat) interactive(ctx context.Context, in io.Reader) int {
	// Find out now, not after the owner has typed, whether loopd runs.
	conn, err := c.dial(ctx)
	if err != nil {
		c.fail(err)
		return ExitFailed
	}
	conn.Close()
	fmt.Fprintf(c.stderr, "bxctl chat: session %s; resume it with: bxctl chat --session %s\n", c.session, c.session)
	fmt.Fprintln(c.stderr, "bxctl chat: type a message and press Enter; Ctrl-D ends")

	done := make(chan struct{})
	defer close(done)
	lines := readLines(in, done)
	for {
		if c.tty {
			fmt.Fprint(c.stdout, "> ")
		}
		var l inputLine
		select {
		case <-ctx.Done():
			fmt.Fprintln(c.stdout)
			return ExitOK
		case got, ok := <-lines:
			if !ok {
				return ExitOK
			}
			l = got
		}
		if l.err != nil {
			if !errors.Is(l.err, errLineTooLong) {
				c.fail(fmt.Errorf("read stdin: %w", l.err))
				return ExitFailed
			}
			fmt.Fprintf(c.stderr, "bxctl chat: not sent: %v\n", l.err)
			continue
		}
		if strings.TrimSpace(l.text) == "" {
			continue
		}
		if err := checkMessage(l.text); err != nil {
			fmt.Fprintf(c.stderr, "bxctl chat: not sent: %v\n", err)
			continue
		}
		if _, err := c.turn(ctx, l.text); err != nil {
			c.fail(err)
			if errors.Is(err, errInterrupted) {
				return ExitOK
			}
			return ExitFailed
		}
	}
}

// errLineTooLong is a line of input over wire.MaxMessage bytes; it is
// skipped, not sent in pieces.
var errLineTooLong = fmt.Errorf("the line is over the limit of %d bytes", wire.MaxMessage)

type inputLine struct {
	text string
	err  error
}

// readLines reads lines from in and hands them over one at a time until
// end of input, a read error, or done is closed.
func readLines(in io.Reader, done <-chan struct{}) <-chan inputLine {
	out := make(chan inputLine)
	go func() {
		defer close(out)
		br := bufio.NewReader(in)
		for {
			text, err := readLine(br, wire.MaxMessage)
			if err == io.EOF {
				return
			}
			select {
			case out <- inputLine{text, err}:
			case <-done:
				return
			}
			if err != nil && !errors.Is(err, errLineTooLong) {
				return
			}
		}
	}()
	return out
}

// readLine reads one line without its line ending, holding at most about
// max bytes of it: a longer line is read to its end and refused.
func readLine(br *bufio.Reader, max int) (string, error) {
	var line []byte
	long := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !long {
			line = append(line, chunk...)
			if len(line) > max+2 { // room for "\r\n"
				long, line = true, nil
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && len(line) == 0 && !long {
			return "", err
		}
		if long {
			return "", errLineTooLong
		}
		s := strings.TrimSuffix(string(line), "\n")
		s = strings.TrimSuffix(s, "\r")
		if len(s) > max {
			return "", errLineTooLong
		}
		return s, nil
	}
}

// fail reports an error that ends the command. Its text may quote what
// loopd sent, so it is escaped like everything else from loopd.
func (c *chat) fail(err error) {
	fmt.Fprintf(c.stderr, "bxctl chat: %s\n", escape.Line(err.Error()))
}
