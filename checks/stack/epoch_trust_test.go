package stack

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	session "wntrmute.dev/boxmaker/pkg/logs/sessionlog"
)

// TestStackEpochTrust: a session that read an untrusted tool result (a
// real read_file in a container under an untrusted grant), then changed
// epoch (bxctl compact), is still untrusted: loopd's head record of the
// new epoch carries it; brokerd's state is the session's, not the
// epoch's, so memoryd routes an identity add made in the new epoch to a
// note; and recall labels the new epoch's indexed turns memory-tainted,
// from memoryd's index as kept and after bxctl reindex. (gatewayd's
// rendering has no clean mode to fall back to: every answer is rendered
// with links and images defanged whatever the session's trust, package
// render.)
func TestStackEpochTrust(t *testing.T) {
	t.Parallel()
	bin, state, srv := stack(t, 65536)
	page := untrustedFiles(t, state)
	epochConfig(t, state, -1, 1, false, "")
	up(t, bin, state, srv)
	srv.Script(
		fake.Reply{Reasoning: "Read it.", ToolCalls: []fake.ToolCall{{Name: "call_tool", Arguments: fmt.Sprintf(`{"name":"read_file","arguments":{"path":%q}}`, page)}}},
		fake.Reply{Reasoning: "Done.", Content: "Read."},
	)
	chat(t, bin, state, "s1", "read my saved oolong page")
	if r := toolResults(t, state, "s1"); len(r) != 1 || !r[0].Untrusted {
		t.Fatalf("s1 results = %s, want the page marked untrusted", show(r))
	}
	srv.Script(stageReply, fake.Reply{Reasoning: "Summarise.", Content: "The owner had me read a saved page about tea."})
	if out, err := bxctl(t, bin, "compact", "--state", state, "s1"); err != nil || !strings.Contains(out, "now in epoch 1") {
		t.Fatalf("bxctl compact: %v\n%s", err, out)
	}
	recs, _ := epochRecords(t, state, "s1", 1)
	if h, ok := recs[0].(*session.Head); !ok || !h.Untrusted {
		t.Fatalf("epoch 1's head = %+v, want it untrusted", recs[0])
	}
	// An identity add in the new epoch becomes a note.
	srv.Script(
		fake.Reply{Reasoning: "Remember.", ToolCalls: []fake.ToolCall{{Name: "memory", Arguments: `{"action":"add","file":"user","text":"The owner likes zhuyecha tea."}`}}},
		fake.Reply{Reasoning: "Done.", Content: "Noted."},
	)
	chat(t, bin, state, "s1", "remember that I like zhuyecha")
	var add *session.ToolResult
	for _, r := range recs1Results(t, state) {
		add = r
	}
	if add == nil || !strings.Contains(add.Content, "has read untrusted content, so the entry was saved as note") {
		t.Errorf("the identity add in epoch 1 = %+v, want a note", add)
	}
	if got := readFile(t, filepath.Join(state, "memory", "user.md")); strings.Contains(got, "zhuyecha") {
		t.Errorf("the add reached identity: %q", got)
	}
	// recall labels epoch 1's turns memory-tainted, before and after a
	// reindex.
	for _, reindex := range []bool{false, true} {
		if reindex {
			if out, err := bxctl(t, bin, "reindex", "--state", state); err != nil {
				t.Fatalf("bxctl reindex: %v %s", err, out)
			}
		}
		id := fmt.Sprintf("r%v", reindex)
		srv.Script(
			fake.Reply{Reasoning: "Search.", ToolCalls: []fake.ToolCall{{Name: "recall", Arguments: `{"query":"zhuyecha","k":10}`}}},
			fake.Reply{Reasoning: "Answer.", Content: "Found."},
		)
		chat(t, bin, state, id, "what tea do I like?")
		r := toolResults(t, state, id)
		if len(r) != 1 || !strings.Contains(r[0].Content, "source=memory-tainted class=private from=session s1 epoch 1") || strings.Contains(r[0].Content, "source=memory class") {
			t.Errorf("recall (reindexed %v) = %s, want epoch 1's turn memory-tainted", reindex, show(r))
		}
	}
}

// recs1Results are the tool results of s1's epoch 1.
func recs1Results(t *testing.T, state string) []*session.ToolResult {
	recs, _ := epochRecords(t, state, "s1", 1)
	var out []*session.ToolResult
	for _, r := range recs {
		if tr, ok := r.(*session.ToolResult); ok {
			out = append(out, tr)
		}
	}
	return out
}
