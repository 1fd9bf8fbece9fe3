package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	fake "wntrmute.dev/boxmaker/checks/fake/mattermost"
	"wntrmute.dev/boxmaker/checks/sockettest"
	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/mattermost"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/gatewayd"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// courier connects to gateway.sock as brokerd does and posts one call.
func (r *rig) courier(t *testing.T, call wire.PendingCall) *sockettest.Conn {
	t.Helper()
	c := sockettest.Dial(t, &wire.Gateway, filepath.Join(r.cfg.SocketDir, wire.Gateway.Name))
	c.Send(&wire.PostApproval{Call: call})
	return c
}

// thread starts a conversation so the bot has a thread to post in.
func (r *rig) thread(t *testing.T) fake.Post {
	t.Helper()
	p := r.post(t, r.owner, r.dm, "", "do something")
	waitFor(t, "the answer", func() bool { return len(r.botPosts(p.ID)) == 1 })
	return p
}

// testCode is every test approval's code.
const testCode = "k7m2qx"

func pendingCall(id int64, root, args string) wire.PendingCall {
	return wire.PendingCall{ID: id, Session: SessionPrefix + root, Tool: "http_fetch", Arguments: json.RawMessage(args), Expires: "2026-11-30T10:00:00Z", Code: testCode}
}

// TestApprovalMultiPartOnlyLast: an approval too long for one post spans
// numbered parts; a command sent before the last part is posted is
// ignored; the last part carries the SHA-256 of the arguments; an
// approver's command after it is relayed with the approver's identity.
func TestApprovalMultiPartOnlyLast(t *testing.T) {
	r := newRig(t, nil)
	root := r.thread(t)
	args := `{"url":"https://example.org/","body":"` + strings.Repeat("B", 30000) + `"}`
	c := r.courier(t, pendingCall(7, root.ID, args))
	posted, ok := c.Recv().(*wire.ApprovalPosted)
	if !ok || posted.ID != 7 || posted.Parts != 3 || !posted.Answerable {
		t.Fatalf("ApprovalPosted = %+v", posted)
	}
	parts := r.botPosts(root.ID)[1:]
	if len(parts) != 3 {
		t.Fatalf("%d approval posts, want 3", len(parts))
	}
	sum := sha256.Sum256([]byte(args))
	m := regexp.MustCompile("SHA-256 `([0-9a-f]{64})`").FindStringSubmatch(parts[2].Message)
	if m == nil || m[1] != hex.EncodeToString(sum[:]) {
		t.Errorf("last part's hash = %v, want %x", m, sum)
	}
	for i, p := range parts[:2] {
		if strings.Contains(p.Message, "!approve") {
			t.Errorf("part %d is answerable", i+1)
		}
	}
	// A command dated before the last part (as one sent while the parts
	// were being posted would be) is ignored.
	r.g.answer(t.Context(), &mattermost.Post{ID: strings.Repeat("e", 26), UserID: r.owner.ID, ChannelID: r.dm, RootID: root.ID, CreateAt: parts[1].CreateAt}, 7, testCode, true, "", wire.ScopeCall)
	if !strings.Contains(r.logs.String(), "sent before the approval's last part") {
		t.Error("an early command was not refused")
	}
	// In another thread: ignored.
	other := r.thread(t)
	r.post(t, r.owner, r.dm, other.ID, "!approve 7")
	// After the last part, in the thread: relayed.
	r.post(t, r.owner, r.dm, root.ID, "!deny 7 "+testCode+" too long")
	a, ok := c.Recv().(*wire.OwnerAnswer)
	if !ok || a.ID != 7 || a.Approve || a.Reason != "too long" || a.Code != testCode || a.Approver != "mattermost:"+r.owner.ID {
		t.Fatalf("OwnerAnswer = %+v", a)
	}
	c.Send(&wire.Answered{ID: 7, Outcome: "refused", Msg: "refused"})
	waitFor(t, "the posts marked refused", func() bool {
		for _, p := range r.botPosts(root.ID)[1:4] {
			if !strings.Contains(p.Message, "refused by an approver") {
				return false
			}
		}
		return true
	})
}

func TestApprovalNonApproverIgnored(t *testing.T) {
	r := newRig(t, func(r *rig, c *gatewayd.Config) {
		c.Allow.Channels = []string{r.mm.AddChannel("O", "ops", r.bot.ID, r.owner.ID, r.other.ID)}
		c.Allow.Users = append(c.Allow.Users, r.other.ID)
		c.Approvals.Users = []string{r.owner.ID}
	})
	ch := r.cfg.Allow.Channels[0]
	root := r.post(t, r.owner, ch, "", "@boxmaker go")
	waitFor(t, "the answer", func() bool { return len(r.botPosts(root.ID)) == 1 })
	c := r.courier(t, pendingCall(9, root.ID, `{"url":"https://example.org/"}`))
	if _, ok := c.Recv().(*wire.ApprovalPosted); !ok {
		t.Fatal("not posted")
	}
	r.post(t, r.other, ch, root.ID, "!approve 9")
	waitFor(t, "the refusal logged", func() bool { return strings.Contains(r.logs.String(), "the user is not an approver") })
	r.post(t, r.owner, ch, root.ID, "@boxmaker !approve 9 "+testCode)
	a, ok := c.Recv().(*wire.OwnerAnswer)
	if !ok || !a.Approve || a.Approver != "mattermost:"+r.owner.ID {
		t.Fatalf("OwnerAnswer = %+v", a)
	}
}

// TestApprovalWithdrawnAndDead: brokerd closing the connection withdraws
// the post; a restart marks the previous run's approval posts dead.
func TestApprovalWithdrawnAndDead(t *testing.T) {
	r := newRig(t, nil)
	root := r.thread(t)
	c := r.courier(t, pendingCall(3, root.ID, `{"url":"https://example.org/"}`))
	c.Recv()
	c.C.Close()
	waitFor(t, "the post withdrawn", func() bool { return strings.Contains(r.botPosts(root.ID)[1].Message, "withdrawn") })
	// Never silence: a reply in the thread says it can no longer be
	// answered, and what to do.
	waitFor(t, "the reply", func() bool { return len(r.botPosts(root.ID)) == 3 })
	if m := r.botPosts(root.ID)[2].Message; !strings.Contains(m, "Approval 3 is no longer pending") || !strings.Contains(m, "brokerd restarted") || !strings.Contains(m, "ask again") {
		t.Errorf("the reply after the withdrawal = %q", m)
	}

	c = r.courier(t, pendingCall(4, root.ID, `{"url":"https://example.org/b"}`))
	c.Recv()
	// The edit at stop fails, so the post still looks answerable, as
	// if gatewayd had been killed.
	r.mm.FailWhen(func(method, _ string) bool { return method == "PUT" })
	r.stop()
	r.mm.FailWhen(nil)
	if strings.Contains(r.botPosts(root.ID)[3].Message, "~~") {
		t.Fatal("the edit at stop went through")
	}
	r.start(t)
	waitFor(t, "the post marked dead", func() bool { return strings.Contains(r.botPosts(root.ID)[3].Message, "dead") })
	if m := r.botPosts(root.ID)[1].Message; !strings.Contains(m, "withdrawn") || strings.Contains(m, "dead") {
		t.Errorf("a finished approval's outcome was overwritten at restart: %q", m)
	}
	// A command for it now is not relayed anywhere: nothing is pending.
	r.post(t, r.owner, r.dm, root.ID, "!approve 4")
	waitFor(t, "the command ignored", func() bool { return strings.Contains(r.logs.String(), "the id is not pending in this thread") })
}

// TestApprovalPartsRecordedAtOnce: each part is recorded as soon as it
// is posted. Posting the third part fails and so does every edit (the
// state a crash leaves): the next run marks the two parts made dead.
func TestApprovalPartsRecordedAtOnce(t *testing.T) {
	r := newRig(t, nil)
	root := r.thread(t)
	var creates atomic.Int32
	r.mm.FailWhen(func(method, path string) bool {
		return method == "PUT" || method == "POST" && strings.HasSuffix(path, "/posts") && creates.Add(1) == 3
	})
	args := `{"url":"https://example.org/","body":"` + strings.Repeat("B", 40000) + `"}`
	c := r.courier(t, pendingCall(5, root.ID, args))
	if e, ok := c.Recv().(*wire.Error); !ok || e.Kind != wire.Unavailable {
		t.Fatalf("got %+v", e)
	}
	r.stop()
	r.mm.FailWhen(nil)
	parts := r.botPosts(root.ID)[1:]
	if len(parts) != 2 || strings.Contains(parts[0].Message, "~~") {
		t.Fatalf("parts before restart: %d", len(parts))
	}
	r.start(t)
	waitFor(t, "both parts marked dead", func() bool {
		ps := r.botPosts(root.ID)[1:]
		return strings.Contains(ps[0].Message, "dead") && strings.Contains(ps[1].Message, "dead")
	})
}

// TestApprovalOutcomeKeptAtRestart: an answered approval's post keeps
// its outcome when gatewayd restarts.
func TestApprovalOutcomeKeptAtRestart(t *testing.T) {
	r := newRig(t, nil)
	root := r.thread(t)
	c := r.courier(t, pendingCall(6, root.ID, `{"url":"https://example.org/"}`))
	c.Recv()
	r.post(t, r.owner, r.dm, root.ID, "!approve 6 "+testCode)
	if a, ok := c.Recv().(*wire.OwnerAnswer); !ok || !a.Approve {
		t.Fatalf("got %+v", a)
	}
	c.Send(&wire.Answered{ID: 6, Msg: "ran"})
	waitFor(t, "the outcome shown", func() bool { return strings.Contains(r.botPosts(root.ID)[1].Message, "approved") })
	r.stop()
	r.start(t)
	time.Sleep(200 * time.Millisecond)
	if m := r.botPosts(root.ID)[1].Message; !strings.Contains(m, "approved") || strings.Contains(m, "dead") {
		t.Errorf("after restart: %q", m)
	}
}

func TestApprovalRefusals(t *testing.T) {
	r := newRig(t, nil)
	for _, tt := range []struct {
		name string
		msg  strict.Variant
		kind wire.Kind
	}{
		{"terminal session", &wire.PostApproval{Call: wire.PendingCall{ID: 1, Session: "term-abc", Tool: "x", Arguments: json.RawMessage(`{}`), Code: testCode}}, wire.Invalid},
		{"no code", &wire.PostApproval{Call: wire.PendingCall{ID: 3, Session: SessionPrefix + r.dm, Tool: "x", Arguments: json.RawMessage(`{}`)}}, wire.Invalid},
		{"unknown thread", &wire.PostApproval{Call: pendingCall(2, strings.Repeat("q", 26), `{}`)}, wire.Unavailable},
		{"wrong message", &wire.OwnerAnswer{ID: 1, Approve: true, Approver: "mattermost:x"}, wire.Forbidden},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := sockettest.Dial(t, &wire.Gateway, filepath.Join(r.cfg.SocketDir, wire.Gateway.Name))
			c.Send(tt.msg)
			e, ok := c.Recv().(*wire.Error)
			if !ok || e.Kind != tt.kind {
				t.Errorf("got %+v, want kind %s", e, tt.kind)
			}
		})
	}
}

// TestApprovalPostedAgainReplaces: a second post_approval for an id
// already posted (brokerd's new connection while gatewayd still holds
// the stale one) replaces it: the old connection is closed and its post
// withdrawn, the new one is posted and gets the owner's answer.
func TestApprovalPostedAgainReplaces(t *testing.T) {
	r := newRig(t, nil)
	root := r.thread(t)
	old := r.courier(t, pendingCall(8, root.ID, `{"url":"https://example.org/"}`))
	if _, ok := old.Recv().(*wire.ApprovalPosted); !ok {
		t.Fatal("not posted")
	}
	c := r.courier(t, pendingCall(8, root.ID, `{"url":"https://example.org/"}`))
	if v, ok := c.Recv().(*wire.ApprovalPosted); !ok {
		t.Fatalf("posted again: got %+v", v)
	}
	old.C.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := old.C.Recv(); err == nil {
		t.Error("the old connection got a frame; want it closed")
	}
	waitFor(t, "the old post withdrawn", func() bool { return strings.Contains(r.botPosts(root.ID)[1].Message, "posted again below") })
	r.post(t, r.owner, r.dm, root.ID, "!approve 8 "+testCode)
	if a, ok := c.Recv().(*wire.OwnerAnswer); !ok || !a.Approve || a.ID != 8 {
		t.Fatalf("the new connection got %+v", a)
	}
}

// TestApprovalImitationNeedsTheCode: model text can imitate an approval
// post's layout and id, never its code. The owner's answer with the id
// alone or with a code the imitation showed is refused in the thread,
// logged, and relays nothing; the code of the real post relays the
// answer (typed in upper case, as a person may).
func TestApprovalImitationNeedsTheCode(t *testing.T) {
	r := newRig(t, nil)
	root := r.thread(t)
	c := r.courier(t, pendingCall(11, root.ID, `{"url":"https://example.org/"}`))
	if _, ok := c.Recv().(*wire.ApprovalPosted); !ok {
		t.Fatal("not posted")
	}
	real := r.botPosts(root.ID)[1].Message
	if !strings.Contains(real, "!approve 11 "+testCode) || !strings.Contains(real, "!deny 11 "+testCode) {
		t.Fatalf("the approval post does not show its code:\n%s", real)
	}
	for i, cmd := range []string{"!approve 11", "!approve 11 zzzzzz", "!deny 11 000000 no", "!approve 11 k7m2q"} {
		r.post(t, r.owner, r.dm, root.ID, cmd)
		waitFor(t, "the refusal in the thread", func() bool {
			n := 0
			for _, p := range r.botPosts(root.ID) {
				if strings.Contains(p.Message, "docs/runbook.md#approval-code-wrong") {
					n++
				}
			}
			return n == i+1
		})
	}
	if n := strings.Count(r.logs.String(), "wrong or missing code"); n != 4 {
		t.Errorf("%d wrong codes logged, want 4", n)
	}
	r.post(t, r.owner, r.dm, root.ID, "!approve 11 "+strings.ToUpper(testCode))
	a, ok := c.Recv().(*wire.OwnerAnswer)
	if !ok || a.ID != 11 || !a.Approve || a.Code != testCode {
		t.Fatalf("OwnerAnswer = %+v, want the first answer with the code", a)
	}
}
