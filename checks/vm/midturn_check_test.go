package vm

import (
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/checks/vm/fakes"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/model/chat"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// TestCheckMidTurn needs no VM: the mid-turn kill's judgement passes what
// each role may do and catches what would be a loss.
func TestCheckMidTurn(t *testing.T) {
	const session = "mm-root1"
	line := func(r sessionlog.Record) string {
		b, err := sessionlog.Records.Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(b) + "\n"
	}
	user := func(role string) string { return line(&sessionlog.User{Turn: 1, Text: fakes.MidTurnMessage(role)}) }
	answer := func(role string) string {
		return line(&sessionlog.Assistant{Turn: 1, Message: chat.Message{Role: "assistant", Content: fakes.MidTurnAnswer(role)}})
	}
	end := line(&sessionlog.TurnEnd{Turn: 1})
	stopped := line(&sessionlog.Stopped{Turn: 1, Reason: wire.StopInterrupted, Msg: "loopd stopped before this message was answered; it stays"})
	failed := line(&sessionlog.Stopped{Turn: 1, Reason: wire.StopInterrupted, Msg: "the turn failed: model: truncated"})
	recall := func(s wire.ToolStatus) string {
		return line(&sessionlog.ToolResult{Turn: 1, CallID: "c1", Tool: "recall", Status: s, Content: "x", Label: dataclass.Label{Class: dataclass.Public}})
	}
	outcome := func(text string) fakes.Post { return fakes.Post{Message: text, Turn: session + ":1:1/1"} }
	notice := fakes.Post{Message: "Boxmaker could not answer: loopd: the turn failed"}
	interrupted := outcome("The turn was stopped (interrupted): loopd stopped before this message was answered; it stays")
	failure := outcome("The turn was stopped (interrupted): the turn failed: model: truncated")

	for _, tc := range []struct {
		name, role    string
		before, after string
		posts         []fakes.Post
		bad           string // "" when the case must pass
	}{
		{"gatewayd answered once", layout.Gatewayd, user(layout.Gatewayd), user(layout.Gatewayd) + answer(layout.Gatewayd) + end,
			[]fakes.Post{outcome(fakes.MidTurnAnswer(layout.Gatewayd))}, ""},
		{"gatewayd answered twice", layout.Gatewayd, user(layout.Gatewayd), user(layout.Gatewayd) + answer(layout.Gatewayd) + end,
			[]fakes.Post{outcome(fakes.MidTurnAnswer(layout.Gatewayd)), outcome(fakes.MidTurnAnswer(layout.Gatewayd))}, "want exactly one"},
		{"gatewayd never answered", layout.Gatewayd, user(layout.Gatewayd), user(layout.Gatewayd) + answer(layout.Gatewayd) + end,
			nil, "want exactly one"},
		{"gatewayd with a notice", layout.Gatewayd, user(layout.Gatewayd), user(layout.Gatewayd) + answer(layout.Gatewayd) + end,
			[]fakes.Post{notice, outcome(fakes.MidTurnAnswer(layout.Gatewayd))}, "unexpected post"},
		{"loopd interrupted", layout.Loopd, user(layout.Loopd), user(layout.Loopd) + stopped + end,
			[]fakes.Post{notice, interrupted}, ""},
		{"loopd's turn answered after all", layout.Loopd, user(layout.Loopd), user(layout.Loopd) + answer(layout.Loopd) + end,
			[]fakes.Post{notice, outcome(fakes.MidTurnAnswer(layout.Loopd))}, "want the answer: false"},
		{"the log rewritten", layout.Loopd, user(layout.Loopd) + answer(layout.Loopd), user(layout.Loopd) + stopped + end,
			[]fakes.Post{notice, interrupted}, "does not extend"},
		{"the message lost", layout.Loopd, user(layout.Loopd), stopped + end,
			[]fakes.Post{notice, interrupted}, "does not extend"},
		{"a partial last line", layout.Loopd, user(layout.Loopd), user(layout.Loopd) + stopped + strings.TrimSuffix(end, "\n"),
			[]fakes.Post{notice, interrupted}, "partial line"},
		{"inferproxy's failure told once", layout.Inferproxy, user(layout.Inferproxy), user(layout.Inferproxy) + failed + end,
			[]fakes.Post{failure}, ""},
		{"inferproxy's failure with a notice", layout.Inferproxy, user(layout.Inferproxy), user(layout.Inferproxy) + failed + end,
			[]fakes.Post{notice, failure}, "unexpected post"},
		{"inferproxy's failure blamed on loopd", layout.Inferproxy, user(layout.Inferproxy), user(layout.Inferproxy) + stopped + end,
			[]fakes.Post{interrupted}, "want exactly one"},
		{"the turn never ended", layout.Inferproxy, user(layout.Inferproxy), user(layout.Inferproxy) + failed,
			[]fakes.Post{failure}, "turn ends"},
		{"a garbled line", layout.Inferproxy, user(layout.Inferproxy), user(layout.Inferproxy) + "{\"type\":\"user\",\"tu\n" + failed + end,
			[]fakes.Post{failure}, "0.jsonl:2"},
		{"brokerd's call denied", layout.Brokerd, user(layout.Brokerd), user(layout.Brokerd) + recall(wire.StatusDenied) + answer(layout.Brokerd) + end,
			[]fakes.Post{outcome(fakes.MidTurnAnswer(layout.Brokerd))}, ""},
		{"brokerd's call ran", layout.Brokerd, user(layout.Brokerd), user(layout.Brokerd) + recall(wire.StatusRan) + answer(layout.Brokerd) + end,
			[]fakes.Post{outcome(fakes.MidTurnAnswer(layout.Brokerd))}, "want the one recall denied"},
		{"memoryd's call failed", layout.Memoryd, user(layout.Memoryd), user(layout.Memoryd) + recall(wire.StatusFailed) + answer(layout.Memoryd) + end,
			[]fakes.Post{outcome(fakes.MidTurnAnswer(layout.Memoryd))}, ""},
		{"memoryd's turn re-run", layout.Memoryd, user(layout.Memoryd), user(layout.Memoryd) + recall(wire.StatusFailed) + recall(wire.StatusRan) + answer(layout.Memoryd) + end,
			[]fakes.Post{outcome(fakes.MidTurnAnswer(layout.Memoryd))}, "want the one recall"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := checkMidTurn(midTurnWants[tc.role], tc.role, session, []byte(tc.before), []byte(tc.after), tc.posts)
			all := strings.Join(bad, "\n")
			if tc.bad == "" && len(bad) != 0 {
				t.Errorf("found %s", all)
			}
			if tc.bad != "" && !strings.Contains(all, tc.bad) {
				t.Errorf("found %q, want a problem saying %q", all, tc.bad)
			}
		})
	}
}
