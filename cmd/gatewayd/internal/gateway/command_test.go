package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/sockettest"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/gatewayd"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
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
// approver are ignored (logged, no reply, never the model's, never
// memoryd's); without memchat.sock the owner's are answered with
// where to run them; with it, they go to memchat.sock with the thread's
// channel, the thread and the approver, a trailing code is cut off as
// the code, and memoryd's answers (the chain, the code to repeat, the
// receipt, a refusal) are posted in the thread. The turn's Send names
// the thread's channel.
func TestMemoryCommands(t *testing.T) {
	for _, served := range []bool{false, true} {
		t.Run(fmt.Sprint("served=", served), func(t *testing.T) { testMemoryCommands(t, served) })
	}
}

func testMemoryCommands(t *testing.T, served bool) {
	var mu sync.Mutex
	var got []strict.Variant
	chat := func(ctx context.Context, peer sockets.Peer, c net.Conn) {
		rpc.NewServer(&wire.Memchat, slog.New(slog.DiscardHandler),
			rpc.On(func(_ context.Context, _ sockets.Peer, r *wire.ChatWhy) strict.Variant {
				mu.Lock()
				got = append(got, r)
				mu.Unlock()
				return &wire.WhyChain{ID: r.ID, Steps: []string{"note n1: kind note", "session s3 was untrusted there"}}
			}),
			rpc.On(func(_ context.Context, _ sockets.Peer, r *wire.ChatForget) strict.Variant {
				mu.Lock()
				got = append(got, r)
				mu.Unlock()
				code, _ := wire.ParseApprovalCode(r.Code) // as memoryd reads it
				switch {
				case r.Code == "":
					return &wire.ForgetCode{ID: r.ID, What: "note n1: sencha", Code: "7k2mq9", Minutes: 10}
				case code == "7k2mq9":
					return &wire.MemoryDone{Msg: "forgot n1: tombstone n2"}
				}
				return &wire.Error{Op: "forget", Kind: wire.Denied, Msg: "nothing was forgotten: the code is wrong; see docs/runbook.md#memory-chat-commands"}
			})).Serve(ctx, peer, c)
	}
	r := newRig(t, func(r *rig, c *gatewayd.Config) {
		c.Allow.Channels = []string{r.mm.AddChannel("O", "ops", r.bot.ID, r.owner.ID, r.other.ID)}
		c.Allow.Users = append(c.Allow.Users, r.other.ID)
		c.Approvals.Users = []string{r.owner.ID}
		if served {
			c.MemoryChatSocket = sockettest.Serve(t, filepath.Join(shortDir(t), "mc"), &wire.Memchat, chat)
		}
	})
	ch := r.cfg.Allow.Channels[0]
	root := r.post(t, r.owner, ch, "", "@boxmaker hello")
	waitFor(t, "the answer", func() bool { return len(r.botPosts(root.ID)) == 1 })
	if s := r.loop.sent(); len(s) != 1 || s[0].Channel != ch {
		t.Errorf("Send = %+v, want channel %s", s, ch)
	}
	r.post(t, r.other, ch, root.ID, "@boxmaker !forget n1 123456")
	r.post(t, r.other, ch, root.ID, "@boxmaker !why n1")
	waitFor(t, "both refusals logged", func() bool {
		return strings.Count(r.logs.String(), "memory command ignored: the user is not an approver") == 2
	})
	r.post(t, r.owner, ch, root.ID, "@boxmaker !forget n1")
	waitFor(t, "the owner's reply", func() bool { return len(r.botPosts(root.ID)) == 2 })
	if !served {
		if m := r.botPosts(root.ID)[1].Message; !strings.Contains(m, "`!forget` is not served in this chat") || !strings.Contains(m, "see docs/runbook.md#memory-chat-commands") {
			t.Errorf("owner's !forget: %q", m)
		}
	} else {
		if m := r.botPosts(root.ID)[1].Message; !strings.Contains(m, "note n1: sencha") || !strings.Contains(m, "`!forget n1 7k2mq9`") {
			t.Errorf("owner's !forget: %q", m)
		}
		for i, tt := range []struct{ cmd, want string }{
			{"!forget n1 zzzzzz", "Nothing was done: nothing was forgotten: the code is wrong"},
			{"!forget n1 7K2MQ9", "Receipt: forgot n1: tombstone n2"},
			{"!why n1", "session s3 was untrusted there"},
		} {
			r.post(t, r.owner, ch, root.ID, "@boxmaker "+tt.cmd)
			waitFor(t, tt.cmd, func() bool { return len(r.botPosts(root.ID)) == 3+i })
			if m := r.botPosts(root.ID)[2+i].Message; !strings.Contains(m, tt.want) {
				t.Errorf("%s: %q, want %q", tt.cmd, m, tt.want)
			}
		}
		mu.Lock()
		want := []strict.Variant{
			&wire.ChatForget{ID: "n1", Thread: root.ID, Channel: ch, User: r.owner.ID},
			&wire.ChatForget{ID: "n1", Thread: root.ID, Channel: ch, User: r.owner.ID, Code: "zzzzzz"},
			&wire.ChatForget{ID: "n1", Thread: root.ID, Channel: ch, User: r.owner.ID, Code: "7K2MQ9"},
			&wire.ChatWhy{ID: "n1", Thread: root.ID, Channel: ch, User: r.owner.ID},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("memoryd got %+v, want %+v", got, want)
		}
		mu.Unlock()
	}
	if n := len(r.loop.sent()); n != 1 {
		t.Errorf("loopd got %d messages; memory commands must never reach the model", n)
	}
}
