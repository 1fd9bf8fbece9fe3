package cli

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/socket/frame"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// fakeLoopd is a loopd on a real loop.sock in a fresh state directory. For
// each Send it receives it calls reply, which writes the turn's frames.
type fakeLoopd struct {
	state string
	reply func(s *wire.Send, conn net.Conn)

	mu    sync.Mutex // guards sends
	sends []wire.Send
}

func newFakeLoopd(t *testing.T, reply func(s *wire.Send, conn net.Conn)) *fakeLoopd {
	t.Helper()
	f := &fakeLoopd{state: t.TempDir(), reply: reply}
	dir := layout.LoopRun.In(f.state)
	if err := sockets.MakeDir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := rpc.Listen(&wire.Loop, sockets.Config{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ln.Serve(ctx, f.serve)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

// serve answers one message and hangs up, as bxctl chat sends one per
// connection; a script that ends without a terminal event so tests a
// loopd that goes away mid-turn.
func (f *fakeLoopd) serve(_ context.Context, _ sockets.Peer, conn net.Conn) {
	body, err := frame.Read(conn, wire.LoopFrameMax)
	if err != nil {
		return
	}
	v, err := wire.LoopRequests.Decode(body)
	if err != nil {
		return
	}
	s := v.(*wire.Send)
	f.mu.Lock()
	f.sends = append(f.sends, *s)
	f.mu.Unlock()
	f.reply(s, conn)
}

func (f *fakeLoopd) received() []wire.Send {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]wire.Send(nil), f.sends...)
}

// script answers every message with the same frames; an event made with
// a nil session gets the sender's.
func script(frames ...func(session string) []byte) func(*wire.Send, net.Conn) {
	return func(s *wire.Send, conn net.Conn) {
		for _, fr := range frames {
			if err := frame.Write(conn, fr(s.Session), wire.LoopFrameMax); err != nil {
				return
			}
		}
	}
}

// ev encodes an event; set fills in the session.
func ev(mk func(session string) strict.Variant) func(string) []byte {
	return func(session string) []byte {
		b, err := wire.LoopEvents.Encode(mk(session))
		if err != nil {
			panic(err)
		}
		return b
	}
}

func raw(s string) func(string) []byte { return func(string) []byte { return []byte(s) } }

func accepted(s string) strict.Variant { return &wire.Accepted{Session: s} }
func working(s string) strict.Variant  { return &wire.Working{Session: s} }

func answer(text string) func(string) []byte {
	return ev(func(s string) strict.Variant { return &wire.Answer{Session: s, Text: text} })
}

// A whole turn: accepted, reasoning, a tool, the answer.
var helloTurn = []func(string) []byte{
	ev(accepted), ev(working),
	ev(func(s string) strict.Variant { return &wire.Reasoning{Session: s, Text: "Let me "} }),
	ev(func(s string) strict.Variant { return &wire.Reasoning{Session: s, Text: "check the time."} }),
	ev(func(s string) strict.Variant { return &wire.ToolRunning{Session: s, CallID: "c1", Tool: "clock"} }),
	ev(func(s string) strict.Variant {
		return &wire.ApprovalPending{Session: s, CallID: "c2", Tool: "write_file", ID: 42}
	}),
	ev(func(s string) strict.Variant {
		return &wire.ToolDenied{Session: s, CallID: "c2", Tool: "write_file", Reason: "the owner refused"}
	}),
	answer("It is noon."),
}

func TestChatOneShot(t *testing.T) {
	f := newFakeLoopd(t, script(helloTurn...))
	code, out, stderr := run("chat", "--state", f.state, "--session", "s1", "--message", "what time is it?")
	if code != ExitOK {
		t.Fatalf("chat = %d, want %d\n%s%s", code, ExitOK, out, stderr)
	}
	want := "Let me check the time.\n" +
		"[tool clock running]\n" +
		"[approval 42: a call to write_file waits for you; review it with bxctl approvals 42, which shows its code, and answer with: bxctl approve 42 CODE]\n" +
		"[tool write_file denied: the owner refused]\n" +
		"It is noon.\n"
	if out != want {
		t.Errorf("stdout =\n%q\nwant\n%q", out, want)
	}
	if strings.Contains(out+stderr, "\x1b") {
		t.Errorf("output to a non-terminal has an escape sequence: %q", out)
	}
	if got := f.received(); len(got) != 1 || !reflect.DeepEqual(got[0], wire.Send{Session: "s1", Text: "what time is it?"}) {
		t.Errorf("loopd received %+v", got)
	}
}

func TestChatNewSession(t *testing.T) {
	f := newFakeLoopd(t, script(answer("hi")))
	for range 2 {
		if code, out, stderr := run("chat", "--state", f.state, "--message", "hi"); code != ExitOK {
			t.Fatalf("chat = %d\n%s%s", code, out, stderr)
		}
	}
	got := f.received()
	re := regexp.MustCompile(`^term-[0-9a-f]{12}$`)
	if len(got) != 2 || !re.MatchString(got[0].Session) || !re.MatchString(got[1].Session) || got[0].Session == got[1].Session {
		t.Errorf("sessions = %+v, want two different term-<12 hex>", got)
	}
}

func TestChatStateFromEnv(t *testing.T) {
	f := newFakeLoopd(t, script(answer("hi")))
	t.Setenv("BOXMAKER_STATE", f.state)
	if code, out, stderr := run("chat", "--message", "hi"); code != ExitOK || out != "hi\n" {
		t.Errorf("chat with $BOXMAKER_STATE = %d, %q, %q", code, out, stderr)
	}
}

func TestChatJSON(t *testing.T) {
	f := newFakeLoopd(t, script(helloTurn...))
	code, out, stderr := run("chat", "--state", f.state, "--session", "s1", "--message", "hi", "--json")
	if code != ExitOK {
		t.Fatalf("chat --json = %d\n%s%s", code, out, stderr)
	}
	var want strings.Builder
	for _, fr := range helloTurn {
		want.Write(fr("s1"))
		want.WriteByte('\n')
	}
	if out != want.String() {
		t.Errorf("stdout =\n%s\nwant\n%s", out, want.String())
	}
}

// TestChatJSONEscapes: a JSON line shows invisible runes as JSON escapes
// and still decodes strictly to the event loopd sent.
func TestChatJSONEscapes(t *testing.T) {
	const text = "a\u202eb\x1b[2J\\u202e\U000e0041"
	f := newFakeLoopd(t, script(answer(text)))
	code, out, _ := run("chat", "--state", f.state, "--session", "s1", "--message", "hi", "--json")
	if code != ExitOK {
		t.Fatalf("chat --json = %d", code)
	}
	line := strings.TrimSuffix(out, "\n")
	if want := `{"type":"answer","session":"s1","text":"a\u202eb\u001b[2J\\u202e\udb40\udc41"}`; line != want {
		t.Errorf("stdout = %s, want %s", line, want)
	}
	v, err := wire.LoopEvents.Decode([]byte(line))
	if a, ok := v.(*wire.Answer); err != nil || !ok || a.Text != text {
		t.Errorf("Decode(%s) = %+v, %v; want the answer %q", line, v, err, text)
	}
}

func TestChatTurnEndsWithoutAnswer(t *testing.T) {
	for _, tt := range []struct {
		name  string
		frame func(string) []byte
		want  string
	}{
		{"stopped", ev(func(s string) strict.Variant {
			return &wire.Stopped{Session: s, Reason: wire.StopToolIterations, Msg: "too many model calls in one turn"}
		}), "the turn was stopped (tool_iterations): too many model calls in one turn"},
		{"error", ev(func(string) strict.Variant {
			return wire.Errorf("send", wire.Unavailable, "the model is unreachable")
		}), "loopd answered with an error: send: unavailable: the model is unreachable"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeLoopd(t, script(ev(accepted), tt.frame))
			code, _, stderr := run("chat", "--state", f.state, "--message", "hi")
			if code != ExitFailed || !strings.Contains(stderr, tt.want) {
				t.Errorf("chat = %d, %q; want %d and %q", code, stderr, ExitFailed, tt.want)
			}
			code, out, _ := run("chat", "--state", f.state, "--message", "hi", "--json")
			if code != ExitFailed || !strings.Contains(out, `"type":"`+tt.name) {
				t.Errorf("chat --json = %d, %q; want %d and the event", code, out, ExitFailed)
			}
		})
	}
}

func TestChatLoopdNotRunning(t *testing.T) {
	state := t.TempDir()
	stale := filepath.Join(state, "stale")
	dir := layout.LoopRun.In(stale)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: layout.Socket(stale, &wire.Loop), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close() // a socket file nobody listens on, as a killed loopd leaves
	t.Cleanup(func() { chatStdin = os.Stdin })
	for name, dir := range map[string]string{"no socket": state, "stale socket": stale} {
		for _, args := range [][]string{{"--message", "hi"}, {}} {
			chatStdin = strings.NewReader("hi\n")
			code, out, stderr := run(append([]string{"chat", "--state", dir}, args...)...)
			if code != ExitFailed || !strings.Contains(stderr, "loopd is not running") || !strings.Contains(stderr, "bxctl up") {
				t.Errorf("%s, chat %q = %d, %q%q; want %d naming bxctl up", name, args, code, out, stderr, ExitFailed)
			}
		}
	}
}

func TestChatUsage(t *testing.T) {
	f := newFakeLoopd(t, script(answer("hi")))
	for _, args := range [][]string{
		{"--message", "hi", "extra"},
		{"--json"},
		{"--nope"},
		{"--message", ""},
		{"--message", " \n"},
		{"--message", strings.Repeat("x", wire.MaxMessage+1)},
		{"--message", "\xff"},
		{"--message", "hi", "--session", "../etc"},
		{"--message", "hi", "--session", ""},
	} {
		code, _, stderr := run(append([]string{"chat", "--state", f.state}, args...)...)
		if code != ExitUsage || !strings.Contains(stderr, "bxctl chat") {
			t.Errorf("chat %.40q = %d, %.200q; want %d", args, code, stderr, ExitUsage)
		}
	}
	if n := len(f.received()); n != 0 {
		t.Errorf("usage errors sent %d messages", n)
	}
}

func TestChatProtocolErrors(t *testing.T) {
	for _, tt := range []struct {
		name   string
		frames []func(string) []byte
	}{
		{"not JSON", []func(string) []byte{raw("not json")}},
		{"unknown type", []func(string) []byte{raw(`{"type":"launch","session":"s1"}`)}},
		{"missing field", []func(string) []byte{raw(`{"type":"answer","session":"s1"}`)}},
		{"unknown field", []func(string) []byte{raw(`{"type":"answer","session":"s1","text":"x","x":1}`)}},
		{"request as event", []func(string) []byte{raw(`{"type":"send","session":"s1","text":"x"}`)}},
		{"invalid UTF-8", []func(string) []byte{raw("{\"type\":\"answer\",\"session\":\"s1\",\"text\":\"\xff\x1b[2J\"}")}},
		{"other session", []func(string) []byte{raw(`{"type":"answer","session":"s2","text":"x"}`)}},
		{"closed before the end", []func(string) []byte{ev(accepted)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeLoopd(t, script(tt.frames...))
			code, out, stderr := run("chat", "--state", f.state, "--session", "s1", "--message", "hi")
			if code != ExitFailed || !strings.Contains(stderr, "protocol error") {
				t.Errorf("chat = %d, %q, %q; want %d and a protocol error", code, out, stderr, ExitFailed)
			}
			if bad := shown(out + stderr); bad != "" {
				t.Errorf("output %q: %s", out+stderr, bad)
			}
		})
	}
}

// shown scans every rune of out and names the first that must never reach
// the terminal raw.
func shown(out string) string {
	if !utf8.ValidString(out) {
		return "not valid UTF-8"
	}
	for _, r := range out {
		if r != '\n' && (!unicode.IsGraphic(r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r)) {
			return fmt.Sprintf("raw %U", r)
		}
	}
	return ""
}

func TestChatInteractive(t *testing.T) {
	f := newFakeLoopd(t, func(s *wire.Send, conn net.Conn) {
		script(ev(accepted), answer("you said "+s.Text))(s, conn)
	})
	chatStdin = strings.NewReader("hello\n\n   \n" + strings.Repeat("x", wire.MaxMessage+1) + "\n" + strings.Repeat("y", 3*wire.MaxMessage) + "\nbad \xff\r\nsecond\r\nlast")
	t.Cleanup(func() { chatStdin = os.Stdin })
	code, out, stderr := run("chat", "--state", f.state)
	if code != ExitOK {
		t.Fatalf("chat = %d\n%s%s", code, out, stderr)
	}
	if want := "you said hello\nyou said second\nyou said last\n"; out != want {
		t.Errorf("stdout = %q, want %q", out, want)
	}
	got := f.received()
	if len(got) != 3 || got[0].Text != "hello" || got[1].Text != "second" || got[2].Text != "last" {
		t.Fatalf("loopd received %+v", got)
	}
	if got[0].Session != got[1].Session || got[1].Session != got[2].Session {
		t.Errorf("messages went to different sessions: %+v", got)
	}
	if !strings.Contains(stderr, "resume it with: bxctl chat --session "+got[0].Session) {
		t.Errorf("stderr does not name the session %s: %q", got[0].Session, stderr)
	}
	if strings.Count(stderr, "not sent") != 3 {
		t.Errorf("stderr should report the two long lines and the non-UTF-8 one: %q", stderr)
	}
}

// TestChatInterrupted: Ctrl-C while loopd is still working ends the wait.
func TestChatInterrupted(t *testing.T) {
	waiting := make(chan struct{})
	f := newFakeLoopd(t, func(s *wire.Send, conn net.Conn) {
		script(ev(accepted), ev(working))(s, conn)
		close(waiting)
		conn.Read(make([]byte, 1)) // until the client hangs up
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-waiting; cancel() }()
	var out, stderr bytes.Buffer
	exit := make(chan int, 1)
	go func() { exit <- runChat(ctx, []string{"--state", f.state, "--message", "hi"}, &out, &stderr) }()
	var code int
	select {
	case code = <-exit:
	case <-time.After(10 * time.Second):
		t.Fatal("chat still waits for loopd 10s after Ctrl-C")
	}
	if code != ExitFailed || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("chat = %d, %q; want %d and interrupted", code, stderr.String(), ExitFailed)
	}
}
