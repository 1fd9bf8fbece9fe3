package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	mm "wntrmute.dev/boxmaker/checks/fake/mattermost"
	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// TestStackJobThroughMattermost: a job delivered by direct message, on
// the real binaries with gatewayd and the fake Mattermost: its run's ask
// is posted in a new thread of the owner's DM naming the job, the
// owner's !approve there reaches brokerd, and the run's report (the
// runner's failure, then the answer) is posted in the DM once.
func TestStackJobThroughMattermost(t *testing.T) {
	t.Parallel()
	js := newJobStack(t, 2*time.Minute, "")
	fmm := mm.New(t)
	bot := fmm.AddUser("boxmaker", true)
	owner := fmm.AddUser("owner", false)
	dm := fmm.Direct(bot.ID, owner.ID)
	cfg := fmt.Sprintf("url = %q\ntoken = \"env:BOXMAKER_TEST_MM_TOKEN\"\n\n[allow]\nusers = [%q]\n", fmm.URL(), owner.ID)
	require.NoError(t, os.WriteFile(filepath.Join(js.state, "config", "gatewayd.toml"), []byte(cfg), 0o600))
	js.at("2026-12-01T09:59:00Z")
	js.owned(&layout.Grants, "reports.toml", readGrant("ask"))
	js.owned(&layout.Jobs, "brief.toml", fmt.Sprintf("name = \"brief\"\ncron = \"0 10 * * *\"\nprompt = \"read today's report\"\ndeliver = \"dm:%s\"\n", owner.ID))
	Up(t, js.bin, js.state, js.host, []string{"BOXMAKER_TEST_MM_TOKEN=" + bot.Token})
	for i := 0; fmm.Connections() < 1; i++ {
		require.Less(t, i, 1500, "gatewayd never connected")
		time.Sleep(20 * time.Millisecond)
	}
	js.until("job brief: cron 0 10 * * *, deliver dm:" + owner.ID)
	js.srv.Script(fake.Reply{Reasoning: "Read.", ToolCalls: []fake.ToolCall{readReport}}, fake.Reply{Reasoning: "Done.", Content: "The report could not be read."})
	js.at("2026-12-01T10:00:00Z")

	botPosts := func() []mm.Post {
		var out []mm.Post
		for _, p := range fmm.Posts(dm) {
			if p.UserID == bot.ID {
				out = append(out, p)
			}
		}
		return out
	}
	var head mm.Post
	var code, id []string
	for i := 0; ; i++ {
		for _, p := range botPosts() {
			if strings.Contains(p.Message, "Scheduled job brief asks to run a tool (session job-brief-1)") {
				head = p
			}
		}
		if head.ID != "" {
			for _, p := range fmm.Thread(head.ID) {
				if m := regexp.MustCompile("`!approve (\\d+) ([0-9a-z]{6})`").FindStringSubmatch(p.Message); m != nil {
					id, code = m[1:2], m[2:3]
				}
			}
		}
		if code != nil {
			break
		}
		log, _ := os.ReadFile(filepath.Join(js.state, "logs", "gatewayd.log"))
		require.Less(t, i, 1500, "the job's ask was not posted in the owner's DM:\n%s", log)
		time.Sleep(20 * time.Millisecond)
	}
	_, err := fmm.PostAs(owner.ID, mm.Post{ChannelID: dm, RootID: head.ID, Message: "!approve " + id[0] + " " + code[0]})
	require.NoError(t, err)
	js.until("last: run 1 (session job-brief-1)", "answer: The report could not be read.")
	var reports []mm.Post
	for i := 0; ; i++ {
		reports = nil
		for _, p := range botPosts() {
			if strings.HasPrefix(p.Message, "Scheduled job brief, run 1: answered") {
				reports = append(reports, p)
			}
		}
		if len(reports) > 0 {
			break
		}
		require.Less(t, i, 1500, "the report was not posted")
		time.Sleep(20 * time.Millisecond)
	}
	require.Len(t, reports, 1)
	require.Contains(t, reports[0].Message, "The report could not be read.")
	log, _ := os.ReadFile(filepath.Join(js.state, "sessions", "job-brief-1", "0.jsonl"))
	require.Contains(t, string(log), "tool containers are not configured", "the approved call did not reach the runner")
}
