package gateway

import (
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/gatewayd"
)

func TestCommands(t *testing.T) {
	r := newRig(t, nil)
	// "!!" sends a literal "!" to the model.
	p := r.post(t, r.owner, r.dm, "", "!!important")
	waitFor(t, "the answer", func() bool { return len(r.botPosts(p.ID)) == 1 })
	if s := r.loop.sent(); len(s) != 1 || s[0].Text != "!important" {
		t.Errorf("loopd got %+v", s)
	}
	// A command never reaches the model.
	q := r.post(t, r.owner, r.dm, "", "!frobnicate now")
	waitFor(t, "the reply", func() bool { return len(r.botPosts(q.ID)) == 1 })
	if !strings.Contains(r.botPosts(q.ID)[0].Message, "Unknown command") || len(r.loop.sent()) != 1 {
		t.Errorf("unknown command: %q, loopd got %d", r.botPosts(q.ID)[0].Message, len(r.loop.sent()))
	}
	// !stop with nothing running.
	r.post(t, r.owner, r.dm, p.ID, "!stop")
	waitFor(t, "the reply", func() bool { return len(r.botPosts(p.ID)) == 2 })
	if m := r.botPosts(p.ID)[1].Message; !strings.Contains(m, "No turn is running") {
		t.Errorf("idle !stop: %q", m)
	}
	// Malformed approval commands get usage, never the model.
	r.post(t, r.owner, r.dm, p.ID, "!approve")
	r.post(t, r.owner, r.dm, p.ID, "!deny x")
	waitFor(t, "usage replies", func() bool { return len(r.botPosts(p.ID)) == 4 })
	if len(r.loop.sent()) != 1 {
		t.Error("a command reached loopd")
	}
}

// TestStopCommand: !stop ends the running turn; the thread shows that it
// was stopped, not an answer; queued messages are dropped.
func TestStopCommand(t *testing.T) {
	r := newRig(t, nil)
	r.loop.delay = 10 * time.Second
	p := r.post(t, r.owner, r.dm, "", "a long job")
	waitFor(t, "the turn", func() bool { return len(r.loop.sent()) == 1 })
	r.post(t, r.owner, r.dm, p.ID, "and another")
	r.post(t, r.owner, r.dm, p.ID, "!stop")
	waitFor(t, "the stop shown", func() bool {
		for _, b := range r.botPosts(p.ID) {
			if strings.Contains(b.Message, "The turn was stopped") {
				return true
			}
		}
		return false
	})
	time.Sleep(100 * time.Millisecond)
	for _, b := range r.botPosts(p.ID) {
		if strings.Contains(b.Message, "echo:") {
			t.Errorf("an answer was posted after !stop: %q", b.Message)
		}
	}
	if n := len(r.loop.sent()); n != 1 {
		t.Errorf("loopd got %d messages; the queued one should be dropped", n)
	}
}

// TestMemoryCommands: !forget and !why from someone who is not an
// approver are ignored (logged, no reply, never the model's); the
// owner's are answered with where to run them, and nothing else happens.
func TestMemoryCommands(t *testing.T) {
	r := newRig(t, func(r *rig, c *gatewayd.Config) {
		c.Allow.Channels = []string{r.mm.AddChannel("O", "ops", r.bot.ID, r.owner.ID, r.other.ID)}
		c.Allow.Users = append(c.Allow.Users, r.other.ID)
		c.Approvals.Users = []string{r.owner.ID}
	})
	ch := r.cfg.Allow.Channels[0]
	root := r.post(t, r.owner, ch, "", "@boxmaker hello")
	waitFor(t, "the answer", func() bool { return len(r.botPosts(root.ID)) == 1 })
	r.post(t, r.other, ch, root.ID, "@boxmaker !forget n1 123456")
	r.post(t, r.other, ch, root.ID, "@boxmaker !why n1")
	waitFor(t, "both refusals logged", func() bool {
		return strings.Count(r.logs.String(), "memory command ignored: the user is not an approver") == 2
	})
	r.post(t, r.owner, ch, root.ID, "@boxmaker !forget n1")
	waitFor(t, "the owner's reply", func() bool { return len(r.botPosts(root.ID)) == 2 })
	if m := r.botPosts(root.ID)[1].Message; !strings.Contains(m, "`!forget` is not served in the chat yet") || !strings.Contains(m, "see docs/runbook.md#memory-chat-commands") {
		t.Errorf("owner's !forget: %q", m)
	}
	if n := len(r.loop.sent()); n != 1 {
		t.Errorf("loopd got %d messages; memory commands must never reach the model", n)
	}
}
