package gateway

import (
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/gatewayd"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// lastBotPost is the newest bot post in root's thread.
func (r *rig) lastBotPost(root string) string {
	p := r.botPosts(root)
	if len(p) == 0 {
		return ""
	}
	return p[len(p)-1].Message
}

// TestApproveSessionAndRevoke: the post says what each answer does;
// `!approve ID CODE session` is relayed with its scope; brokerd's
// confirmation is replied in the thread; the connection stays open and
// `!revoke ID` from an approver reaches brokerd on it (a non-approver's
// does not); the outcome is replied.
func TestApproveSessionAndRevoke(t *testing.T) {
	r := newRig(t, nil)
	root := r.thread(t)
	call := pendingCall(9, root.ID, `{"url":"https://example.org/"}`)
	call.SessionScope = "http_fetch of any URL on host example.org exactly"
	c := r.courier(t, call)
	if _, ok := c.Recv().(*wire.ApprovalPosted); !ok {
		t.Fatal("not posted")
	}
	post := r.lastBotPost(root.ID)
	for _, want := range []string{"`!approve 9 " + testCode + "`: runs this call only", "`!approve 9 " + testCode + " session`: runs it, and from now on runs without asking http\\_fetch of any URL on host example.org exactly", "`!revoke 9` ends it", "`!deny 9 " + testCode + " [reason]`: refuses it"} {
		if !strings.Contains(post, want) {
			t.Errorf("the approval post lacks %q:\n%s", want, post)
		}
	}
	r.post(t, r.owner, r.dm, root.ID, "!approve 9 "+testCode+" forever")
	waitFor(t, "the usage reply", func() bool { return strings.Contains(r.lastBotPost(root.ID), "Usage:") })
	r.post(t, r.owner, r.dm, root.ID, "!approve 9 "+testCode+" session")
	a, ok := c.Recv().(*wire.OwnerAnswer)
	if !ok || !a.Approve || a.Scope != wire.ScopeSession {
		t.Fatalf("OwnerAnswer = %+v, want approve with scope session", a)
	}
	c.Send(&wire.Answered{ID: 9, Outcome: wire.OutcomeAllowance, Msg: "approved; session allowance 9 made: http_fetch of any URL on host example.org exactly"})
	waitFor(t, "the confirmation replied", func() bool {
		return strings.Contains(r.lastBotPost(root.ID), "Approval 9: approved; session allowance 9 made: http")
	})
	r.post(t, r.owner, r.dm, root.ID, "!revoke 8")
	waitFor(t, "the not-live reply", func() bool {
		return strings.Contains(r.lastBotPost(root.ID), "No session allowance 8 can be revoked from this thread")
	})
	r.post(t, r.owner, r.dm, root.ID, "!revoke 9")
	rv, ok := c.Recv().(*wire.AllowanceRevoke)
	if !ok || rv.ID != 9 || rv.Approver != "mattermost:"+r.owner.ID {
		t.Fatalf("after !revoke brokerd got %+v", rv)
	}
	c.Send(&wire.Answered{ID: 9, Outcome: "revoked", Msg: "session allowance 9 revoked: the calls it covered ask again"})
	waitFor(t, "the revocation replied", func() bool { return strings.Contains(r.lastBotPost(root.ID), "session allowance 9 revoked") })
}

// TestSessionAllowanceEndedReplied: brokerd closing a held connection
// (the allowance ended) is said in the thread.
func TestSessionAllowanceEndedReplied(t *testing.T) {
	r := newRig(t, nil)
	root := r.thread(t)
	c := r.courier(t, pendingCall(5, root.ID, `{"url":"https://example.org/"}`))
	c.Recv()
	r.post(t, r.owner, r.dm, root.ID, "!approve 5 "+testCode+" session")
	if a, ok := c.Recv().(*wire.OwnerAnswer); !ok || a.Scope != wire.ScopeSession {
		t.Fatalf("OwnerAnswer = %+v", a)
	}
	c.Send(&wire.Answered{ID: 5, Outcome: wire.OutcomeAllowance, Msg: "approved; session allowance 5 made"})
	waitFor(t, "the confirmation replied", func() bool { return strings.Contains(r.lastBotPost(root.ID), "session allowance 5 made") })
	c.C.Close()
	waitFor(t, "the end replied", func() bool {
		return strings.Contains(r.lastBotPost(root.ID), "Session allowance 5 can no longer be revoked from this thread")
	})
}

// TestApproveSessionNonApprover: a heard user who is not an approver
// cannot make an allowance: the command is ignored and nothing reaches
// brokerd; the approver's own answer that follows is the one relayed.
func TestApproveSessionNonApprover(t *testing.T) {
	r := newRig(t, func(r *rig, c *gatewayd.Config) {
		c.Allow.Channels = []string{r.mm.AddChannel("O", "ops", r.bot.ID, r.owner.ID, r.other.ID)}
		c.Allow.Users = append(c.Allow.Users, r.other.ID)
		c.Approvals.Users = []string{r.owner.ID}
	})
	ch := r.cfg.Allow.Channels[0]
	root := r.post(t, r.owner, ch, "", "@boxmaker go")
	waitFor(t, "the answer", func() bool { return len(r.botPosts(root.ID)) == 1 })
	c := r.courier(t, pendingCall(9, root.ID, `{"url":"https://example.org/"}`))
	c.Recv()
	r.post(t, r.other, ch, root.ID, "!approve 9 "+testCode+" session")
	waitFor(t, "the refusal logged", func() bool { return strings.Contains(r.logs.String(), "the user is not an approver") })
	r.post(t, r.owner, ch, root.ID, "@boxmaker !approve 9 "+testCode)
	a, ok := c.Recv().(*wire.OwnerAnswer)
	if !ok || a.Approver != "mattermost:"+r.owner.ID || a.Scope != wire.ScopeCall {
		t.Fatalf("OwnerAnswer = %+v, want the approver's, for this call only", a)
	}
}
