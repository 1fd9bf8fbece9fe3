package broker

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/sockettest"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// fakeGateway is gatewayd's gateway.sock: each connection brokerd's
// courier opens is handed to the test, and held open until the test
// closes it.
func fakeGateway(t *testing.T) (string, chan *conn) {
	conns := make(chan *conn, 8)
	dir, err := os.MkdirTemp("", "gw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := sockettest.Serve(t, filepath.Join(dir, "gateway"), &wire.Gateway, func(ctx context.Context, _ sockets.Peer, c net.Conn) {
		closed := make(chan struct{})
		conns <- sockettest.Accept(t, &wire.Gateway, closer{c, closed})
		select {
		case <-closed:
		case <-ctx.Done():
		}
	})
	return path, conns
}

type closer struct {
	net.Conn
	closed chan struct{}
}

func (c closer) Close() error {
	select {
	case <-c.closed:
	default:
		close(c.closed)
	}
	return c.Conn.Close()
}

func next(t *testing.T, conns chan *conn) *conn {
	t.Helper()
	select {
	case c := <-conns:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("the courier did not connect")
		return nil
	}
}

// TestCourierRepostsAndRelays: the courier posts a pending approval;
// when gatewayd goes away it posts it again; the owner's answer from the
// chat is taken, recorded with the approver, and the call goes on.
func TestCourierRepostsAndRelays(t *testing.T) {
	gw, conns := fakeGateway(t)
	h := startWith(t, grants, func(c *brokerd.Config) { c.GatewaySocket = gw })
	call := h.call(t, "read_file", `{"path":"/home/owner/Downloads/report.pdf"}`)
	p := call.Recv().(*wire.ToolPending)

	g := next(t, conns)
	post, ok := g.Recv().(*wire.PostApproval)
	if !ok || post.Call.ID != p.ID || post.Call.Session != "s1" || string(post.Call.Arguments) != `{"path":"/home/owner/Downloads/report.pdf"}` {
		t.Fatalf("PostApproval = %+v", post)
	}
	g.Send(&wire.ApprovalPosted{ID: p.ID, Parts: 1, Answerable: true})
	g.C.Close() // gatewayd restarts

	g = next(t, conns)
	if again, ok := g.Recv().(*wire.PostApproval); !ok || again.Call.ID != p.ID {
		t.Fatalf("after a restart: %+v", again)
	}
	g.Send(&wire.ApprovalPosted{ID: p.ID, Parts: 1, Answerable: true})
	// A malformed approver is refused and the approval stays pending.
	g.Send(&wire.OwnerAnswer{ID: p.ID, Approve: true, Approver: "anyone"})
	if e, ok := g.Recv().(*wire.Error); !ok || e.Kind != wire.Invalid {
		t.Fatalf("malformed answer: %+v", e)
	}
	g = next(t, conns)
	g.Recv()
	g.Send(&wire.ApprovalPosted{ID: p.ID, Parts: 1, Answerable: true})
	owner := "mattermost:" + strings.Repeat("o", 26)
	// A code other than the approval's answers nothing.
	wrong := "zzzzzz"
	if post.Call.Code == wrong {
		wrong = "zzzzzy"
	}
	g.Send(&wire.OwnerAnswer{ID: p.ID, Code: wrong, Approve: true, Approver: owner})
	if e, ok := g.Recv().(*wire.Error); !ok || e.Kind != wire.Denied {
		t.Fatalf("answer with a wrong code: %+v", e)
	}
	g = next(t, conns)
	g.Recv()
	g.Send(&wire.ApprovalPosted{ID: p.ID, Parts: 1, Answerable: true})
	g.Send(&wire.OwnerAnswer{ID: p.ID, Code: post.Call.Code, Approve: true, Approver: owner})
	if a, ok := g.Recv().(*wire.Answered); !ok || a.Outcome != "approved" {
		t.Fatalf("answer = %+v", a)
	}
	if r := result(t, call); !strings.Contains(r.Output, "tool containers are not configured") {
		t.Errorf("after the chat's approval: %+v", r)
	}
	h.stop()
	log := readAudit(t, h.cfg.StateDir)
	if !strings.Contains(log, `"approver":"`+owner+`"`) {
		t.Errorf("audit lacks the approver:\n%s", log)
	}
}

// TestCourierWithdrawsWhenAnsweredElsewhere: bxctl's answer closes the
// courier's connection, which withdraws the chat's post.
func TestCourierWithdrawsWhenAnsweredElsewhere(t *testing.T) {
	gw, conns := fakeGateway(t)
	h := startWith(t, grants, func(c *brokerd.Config) { c.GatewaySocket = gw })
	call := h.call(t, "read_file", `{"path":"/home/owner/Downloads/report.pdf"}`)
	p := call.Recv().(*wire.ToolPending)
	g := next(t, conns)
	g.Recv()
	g.Send(&wire.ApprovalPosted{ID: p.ID, Parts: 1, Answerable: true})
	admin := h.dial(t, h.cfg.AdminSocketDir, &wire.Admin)
	admin.Send(&wire.ListApprovals{})
	code := admin.Recv().(*wire.Approvals).Calls[0].Code
	admin.Send(&wire.Refuse{ID: p.ID, Code: code, Reason: "no"})
	admin.Recv()
	g.C.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := g.C.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("gateway side read = %v, want EOF (the connection closed)", err)
	}
	result(t, call)
	h.stop()
	if log := readAudit(t, h.cfg.StateDir); !strings.Contains(log, `"approver":"admin.sock:uid `) {
		t.Errorf("audit lacks bxctl's approver:\n%s", log)
	}
}

func readAudit(t *testing.T, state string) string {
	files, _ := filepath.Glob(filepath.Join(state, "broker", "audit", "*.jsonl"))
	var b strings.Builder
	for _, f := range files {
		d, _ := os.ReadFile(f)
		b.Write(d)
	}
	return b.String()
}

// TestCourierRefusesForeignGateway: when gateway.sock's listener is not
// an allowed user, the courier sends it nothing and closes the
// connection.
func TestCourierRefusesForeignGateway(t *testing.T) {
	gw, conns := fakeGateway(t)
	h := startWith(t, grants, func(c *brokerd.Config) {
		c.GatewaySocket = gw
		c.GatewayAllowUIDs = []uint32{uint32(os.Getuid()) + 1}
	})
	call := h.call(t, "read_file", `{"path":"/home/owner/Downloads/report.pdf"}`)
	call.Recv()
	g := next(t, conns)
	g.C.SetDeadline(time.Now().Add(10 * time.Second))
	if b, err := g.C.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("gateway side read = %q, %v; want EOF and nothing sent", b, err)
	}
}

func TestGatewayUIDsDefault(t *testing.T) {
	if got := (brokerd.Config{}).GatewayUIDs(); len(got) != 1 || got[0] != uint32(os.Getuid()) {
		t.Errorf("default gateway uids = %v", got)
	}
}

// TestCourierConfirmsAfterSlowAnswer: an answer taken just before the
// courier loop looks again (the approval no longer pending) is still
// confirmed to gatewayd, for a yes and a no. Before the connection was
// held for every answer, the loop closed it first and the chat showed
// "brokerd did not confirm the answer" (seen once in CI's race run).
func TestCourierConfirmsAfterSlowAnswer(t *testing.T) {
	afterAnswer = func() { time.Sleep(3 * courierPoll) }
	t.Cleanup(func() { afterAnswer = nil })
	gw, conns := fakeGateway(t)
	h := startWith(t, grants, func(c *brokerd.Config) { c.GatewaySocket = gw })
	owner := "mattermost:" + strings.Repeat("o", 26)
	for _, approve := range []bool{true, false} {
		call := h.call(t, "read_file", `{"path":"/home/owner/Downloads/report.pdf"}`)
		p := call.Recv().(*wire.ToolPending)
		g := next(t, conns)
		post := g.Recv().(*wire.PostApproval)
		g.Send(&wire.ApprovalPosted{ID: p.ID, Parts: 1, Answerable: true})
		g.Send(&wire.OwnerAnswer{ID: p.ID, Code: post.Call.Code, Approve: approve, Approver: owner, Reason: "no"})
		g.C.SetDeadline(time.Now().Add(10 * time.Second))
		v, err := g.C.Recv()
		if err != nil {
			t.Fatalf("approve=%v: the outcome never came: %v", approve, err)
		}
		if a, ok := v.(*wire.Answered); !ok {
			t.Fatalf("approve=%v: answer = %s", approve, v.Tag())
		} else if want := map[bool]string{true: "approved", false: "refused"}[approve]; a.Outcome != want {
			t.Errorf("approve=%v: outcome %q, want %q", approve, a.Outcome, want)
		}
		result(t, call)
	}
}
