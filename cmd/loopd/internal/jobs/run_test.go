package jobs

import (
	"testing"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/socket/wire"

	"github.com/stretchr/testify/require"

	"wntrmute.dev/boxmaker/cmd/loopd/internal/session"
	"wntrmute.dev/boxmaker/pkg/model/chat"
)

// TestCloseInterrupted: a run's log that a stopped loopd left mid-turn
// (a tool call without its result) is closed: the call gets an
// interrupted result and the turn its end; a session that was never
// written is left alone, and closing twice adds nothing.
func TestCloseInterrupted(t *testing.T) {
	state := t.TempDir()
	r := &Runner{State: state}
	id := SessionID("brief", 1)
	s, err := session.Open(state, id, func() (sessionlog.Baseline, error) {
		return sessionlog.Baseline{System: "sys", Tools: []chat.Tool{}}, nil
	})
	require.NoError(t, err)
	require.NoError(t, s.Append(&sessionlog.User{Turn: 1, Text: "go"}))
	call := chat.ToolCall{ID: "c1", Type: "function", Function: chat.FunctionCall{Name: "call_tool", Arguments: `{}`}}
	require.NoError(t, s.Append(&sessionlog.Assistant{Turn: 1, Message: chat.Message{Role: "assistant", ToolCalls: []chat.ToolCall{call}}}))
	require.NoError(t, s.Close())

	require.NoError(t, r.CloseInterrupted(id))
	require.NoError(t, r.CloseInterrupted(id))
	require.NoError(t, r.CloseInterrupted(SessionID("brief", 2)))

	s, err = session.Open(state, id, nil)
	require.NoError(t, err)
	defer s.Close()
	recs := s.Records()
	require.Len(t, recs, 5, "user, assistant, interrupted result, stop, turn end")
	res, ok := recs[2].(*sessionlog.ToolResult)
	require.True(t, ok)
	require.Equal(t, wire.StatusInterrupted, res.Status)
	_, ok = recs[4].(*sessionlog.TurnEnd)
	require.True(t, ok)
}
