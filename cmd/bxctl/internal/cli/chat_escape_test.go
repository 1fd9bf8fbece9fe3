package cli

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/escape"
)

// hostile holds every class escape must neutralise, as the model or a
// compromised loopd could send it.
const hostile = "A\x1b[2JB\x1b]8;;http://evil\x1b\\C\rD\aE\u202eF\u2066G\u200bH\ufeffI\U000e0041J\u0085K\\u202eL\u0301"

// escapedForms must appear in the output: the hostile runes made visible.
var escapedForms = []string{`\u001b[2J`, `\u001b]8;;http://evil\u001b\\`, `\u000d`, `\u0007`, `\u202e`, `\u2066`,
	`\u200b`, `\ufeff`, `\U000e0041`, `\u0085`, `\\u202e`}

// rawForms must not: the hostile runes themselves.
var rawForms = []string{"\x1b", "\r", "\a", "\u202e", "\u2066", "\u200b", "\ufeff", "\U000e0041", "\u0085"}

func TestChatEscapesEverything(t *testing.T) {
	h := func(s string) string { return s + hostile }
	turn := []func(string) []byte{
		ev(accepted),
		ev(func(s string) strict.Variant { return &wire.Reasoning{Session: s, Text: h("think ")} }),
		ev(func(s string) strict.Variant { return &wire.ToolRunning{Session: s, CallID: "c", Tool: h("tool ")} }),
		ev(func(s string) strict.Variant {
			return &wire.ApprovalPending{Session: s, CallID: "c", Tool: h("ask "), ID: 7}
		}),
		ev(func(s string) strict.Variant {
			return &wire.ToolDenied{Session: s, CallID: "c", Tool: h("deny "), Reason: h("why ")}
		}),
		answer(h("answer ")),
	}
	ends := map[string]func(string) []byte{
		"answer": nil,
		"stopped": ev(func(s string) strict.Variant {
			return &wire.Stopped{Session: s, Reason: wire.StopRepeatedCall, Msg: h("stop ")}
		}),
		"error": ev(func(string) strict.Variant {
			return &wire.Error{Op: h("op "), Kind: wire.Internal, Msg: h("msg ")}
		}),
	}
	for name, end := range ends {
		t.Run(name, func(t *testing.T) {
			frames := turn
			if end != nil {
				frames = append(frames[:len(frames)-1:len(frames)-1], end)
			}
			f := newFakeLoopd(t, script(frames...))
			_, out, stderr := run("chat", "--state", f.state, "--message", "hi")
			all := out + stderr
			if bad := shown(all); bad != "" {
				t.Errorf("output has %s:\n%q", bad, all)
			}
			for _, r := range rawForms {
				if strings.Contains(all, r) {
					t.Errorf("output has raw %+q", r)
				}
			}
			for _, e := range escapedForms {
				if !strings.Contains(all, e) {
					t.Errorf("output lacks the escaped form %s:\n%s", e, all)
				}
			}
			want := []string{"think ", "tool ", "ask ", "deny ", "why "}
			switch name {
			case "answer":
				want = append(want, "answer ")
			case "stopped":
				want = append(want, "stop ")
			case "error":
				want = append(want, "op ", "msg ")
			}
			for _, w := range want {
				if got := escape.Line(w + hostile); !strings.Contains(all, got) {
					t.Errorf("output lacks %q escaped whole (%s):\n%s", w, got, all)
				}
			}
		})
	}
}

// TestChatDimsReasoning: on a terminal reasoning is dimmed, the dim is
// reset before anything else, and the only escape sequences are ours.
func TestChatDimsReasoning(t *testing.T) {
	var out bytes.Buffer
	c := &chat{session: "s", tty: true, stdout: &out, stderr: &out}
	c.show(&wire.Reasoning{Session: "s", Text: "think\x1b[0m"})
	c.show(&wire.Reasoning{Session: "s", Text: " more\u202e"})
	c.show(&wire.Answer{Session: "s", Text: "done\x1b[8m"})
	want := sgrDim + `think\u001b[0m more\u202e` + sgrReset + "\n" + `done\u001b[8m` + "\n"
	if out.String() != want {
		t.Errorf("output = %q, want %q", out.String(), want)
	}
	c = &chat{session: "s", stdout: &out, stderr: &out}
	out.Reset()
	c.show(&wire.Reasoning{Session: "s", Text: "think\n"})
	c.show(&wire.Answer{Session: "s", Text: "done"})
	if want := "think\ndone\n"; out.String() != want {
		t.Errorf("output off a terminal = %q, want %q", out.String(), want)
	}
}

func TestTTYOutput(t *testing.T) {
	if ttyOutput(&bytes.Buffer{}) {
		t.Error("ttyOutput(buffer) = true")
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if ttyOutput(null) {
		t.Error("ttyOutput(/dev/null) = true")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if ttyOutput(w) {
		t.Error("ttyOutput(pipe) = true")
	}
	pty, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal to test with: %v", err)
	}
	defer pty.Close()
	if !ttyOutput(pty) {
		t.Error("ttyOutput(/dev/ptmx) = false")
	}
}
