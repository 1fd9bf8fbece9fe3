package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	llama "wntrmute.dev/boxmaker/checks/fake/llama"
	mm "wntrmute.dev/boxmaker/checks/fake/mattermost"
	"wntrmute.dev/boxmaker/checks/podmantest"
	"wntrmute.dev/boxmaker/checks/roletest"
)

// TestStackFilesPostWritten: a file a tool writes in a turn is posted in
// the same turn: write_file (in a real container, through Podman) writes
// it under a directory granted both for writing and for posting, then
// post_file attaches it to the answer, which holds exactly what was
// written.
//
// Not parallel: it shares the Podman service, as TestStackToolRuns.
func TestStackFilesPostWritten(t *testing.T) {
	svc := podmantest.Require(t)
	shareWithBrokerd(t, svc.Socket)
	image := svc.ToolImage(t)
	out := roletest.Readable(t)
	require.NoError(t, os.Chmod(out, 0o777)) // the tool container's user writes here
	grants := fmt.Sprintf("\n[[grant]]\nid = \"out-write\"\ntool = \"write_file\"\npaths = [%q]\nmax_taint = \"secret\"\nmode = \"auto\"\n"+
		"\n[[grant]]\nid = \"out-post\"\ntool = \"post_file\"\npaths = [%q]\nmax_taint = \"secret\"\nmode = \"auto\"\n", out, out)
	_, state, srv, chat, _ := filesStack(t, filesOpts{grants: grants, before: func(state string) {
		require.NoError(t, os.WriteFile(filepath.Join(state, "config", "brokerd.toml"), []byte(fmt.Sprintf(
			"[runner]\npodman_socket = %q\ntool_image = %q\n", svc.Socket, image)), 0o600))
	}})
	fmm, owner, dm := chat.mm, chat.owner, chat.dm
	path := filepath.Join(out, "summary.md")
	srv.Script(
		llama.Reply{Reasoning: "Write it.", ToolCalls: []llama.ToolCall{{Name: "call_tool", Arguments: fmt.Sprintf(`{"name":"write_file","arguments":{"path":%q,"content":"# Summary\n\nRevenue was 42.\n"}}`, path)}}},
		llama.Reply{Reasoning: "Attach it.", ToolCalls: []llama.ToolCall{{Name: "call_tool", Arguments: fmt.Sprintf(`{"name":"post_file","arguments":{"path":%q}}`, path)}}},
		llama.Reply{Reasoning: "Done.", Content: "The summary is attached."},
	)
	q, err := fmm.PostAs(owner.ID, mm.Post{ChannelID: dm, Message: "write me a summary file"})
	require.NoError(t, err)
	var got mm.Post
	for i := 0; got.ID == ""; i++ {
		require.Less(t, i, 6000, "no answer: %+v\n%s", fmm.Thread(q.ID), readLog(state, "brokerd"))
		for _, p := range chat.botPosts(q.ID) {
			if strings.Contains(p.Message, "The summary is attached.") {
				got = p
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.Len(t, got.FileIDs, 1, "the answer post holds %v", got.FileIDs)
	data, info, ok := fmm.FileData(got.FileIDs[0])
	require.True(t, ok)
	require.Equal(t, "# Summary\n\nRevenue was 42.\n", string(data))
	require.Equal(t, "summary.md", info.Name)
}
