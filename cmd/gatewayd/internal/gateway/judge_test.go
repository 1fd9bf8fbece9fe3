package gateway

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
	"time"

	fake "wntrmute.dev/boxmaker/checks/fake/mattermost"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/gatewayd"
)

// logLines returns the rig's JSON log records.
func (r *rig) logLines() []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(r.logs.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// TestStrangerApproveRecorded: an !approve or !deny from someone who is
// not heard at all (not in allow.users) is ignored and recorded at Warn
// with the user id; other unheard posts stay at Debug.
func TestStrangerApproveRecorded(t *testing.T) {
	var eve fake.User
	var ch string
	r := newRig(t, func(r *rig, c *gatewayd.Config) {
		eve = r.mm.AddUser("eve", false)
		ch = r.mm.AddChannel("O", "ops", r.bot.ID, r.owner.ID, eve.ID)
		c.Allow.Channels = []string{ch}
	})
	root := r.post(t, r.owner, ch, "", "@boxmaker hi")
	waitFor(t, "an answer", func() bool { return len(r.botPosts(root.ID)) == 1 })
	cmd := r.post(t, eve, ch, root.ID, "  @boxmaker !approve 3")
	chat := r.post(t, eve, ch, root.ID, "@boxmaker just chatting")
	recorded := func() bool {
		for _, l := range r.logLines() {
			if l["level"] == "WARN" && l["user"] == eve.ID && l["post"] == cmd.ID &&
				strings.Contains(l["msg"].(string), "docs/runbook.md#gateway-not-approver") {
				return true
			}
		}
		return false
	}
	waitFor(t, "the stranger's command recorded at Warn", recorded)
	waitFor(t, "the chat post judged", func() bool { return strings.Contains(r.logs.String(), chat.ID) })
	for _, l := range r.logLines() {
		if l["post"] == chat.ID && l["level"] != "DEBUG" {
			t.Errorf("an ordinary unheard post logged at %v", l["level"])
		}
	}
	if len(r.loop.sent()) != 1 {
		t.Errorf("loopd got %+v", r.loop.sent())
	}
}

// TestUnheardNotSeen: posts that are not heard do not enter the seen
// set (a stranger cannot flush it to replay a heard post).
func TestUnheardNotSeen(t *testing.T) {
	var eve fake.User
	r := newRig(t, func(r *rig, c *gatewayd.Config) { eve = r.mm.AddUser("eve", false) })
	dm := r.mm.Direct(r.bot.ID, eve.ID)
	p := r.post(t, eve, dm, "", "hello")
	waitFor(t, "the post judged", func() bool { return strings.Contains(r.logs.String(), p.ID) })
	heard := r.post(t, r.owner, r.dm, "", "hi")
	waitFor(t, "an answer", func() bool { return len(r.botPosts(heard.ID)) == 1 })
	r.g.mu.Lock()
	defer r.g.mu.Unlock()
	if r.g.seen[p.ID] || !r.g.seen[heard.ID] {
		t.Errorf("seen: stranger's %v, owner's %v", r.g.seen[p.ID], r.g.seen[heard.ID])
	}
}

// TestThreadLookupFailureRetried: a reply in one of this Boxmaker's
// threads whose lookup fails (the server answers 500) is judged again
// later and answered, not dropped for good.
func TestThreadLookupFailureRetried(t *testing.T) {
	var ch string
	r := newRig(t, func(r *rig, c *gatewayd.Config) {
		ch = r.mm.AddChannel("O", "ops", r.bot.ID, r.owner.ID)
		c.Allow.Channels = []string{ch}
		r.lookupRetries = []time.Duration{50 * time.Millisecond}
	})
	// A thread the bot started in an earlier run: this run does not know it.
	root, err := r.mm.PostAs(r.bot.ID, fake.Post{ChannelID: ch, Message: "earlier answer"})
	if err != nil {
		t.Fatal(err)
	}
	r.mm.Fail(1)
	reply := r.post(t, r.owner, ch, root.ID, "and then?")
	waitFor(t, "the reply answered", func() bool {
		for _, p := range r.botPosts(root.ID) {
			if p.ID != root.ID && p.CreateAt >= reply.CreateAt {
				return true
			}
		}
		return false
	})
	if !strings.Contains(r.logs.String(), "thread lookup failed") {
		t.Error("the failed lookup was not logged")
	}
}

// TestCommandAfterBlanks: a command with leading blanks is still a
// command and never reaches the model.
func TestCommandAfterBlanks(t *testing.T) {
	r := newRig(t, nil)
	p := r.post(t, r.owner, r.dm, "", " \n\t!stop")
	waitFor(t, "the stop answered", func() bool { return len(r.botPosts(p.ID)) == 1 })
	if got := r.botPosts(p.ID)[0].Message; !strings.Contains(got, "No turn is running") {
		t.Errorf("reply = %q", got)
	}
	if s := r.loop.sent(); len(s) != 0 {
		t.Errorf("the command reached loopd: %+v", s)
	}
}
