package broker

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/sockettest"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// fakeBroker answers each request with the given frames (nil: say nothing).
func fakeBroker(t *testing.T, answers ...strict.Variant) (string, chan *wire.ToolRequest) {
	t.Helper()
	got := make(chan *wire.ToolRequest, 4)
	path := sockettest.Serve(t, filepath.Join(t.TempDir(), "broker"), &wire.Broker, rpc.NewServer(&wire.Broker, slog.New(slog.DiscardHandler),
		rpc.Stream(func(ctx context.Context, _ sockets.Peer, c *rpc.Conn, r *wire.ToolRequest) error {
			got <- r
			for _, a := range answers {
				c.Send(a)
			}
			<-ctx.Done()
			return nil
		})).Serve)
	return path, got
}

var req = wire.ToolRequest{Session: "s1", CallID: "c1", Tool: "read_file", Arguments: []byte(`{"path":"/x"}`)}

func TestClientRan(t *testing.T) {
	path, got := fakeBroker(t, &wire.ToolResult{Status: wire.StatusRan, Output: "contents", Label: dataclass.Label{Class: dataclass.Private, Untrusted: true}})
	o := (&Client{Path: path}).Call(context.Background(), req, func(int64) { t.Error("pending called") })
	if o.Status != wire.StatusRan || o.Output != "contents" || o.Class != dataclass.Private || !o.Untrusted {
		t.Errorf("Call = %+v", o)
	}
	if r := <-got; r.Tool != "read_file" || string(r.Arguments) != `{"path":"/x"}` || r.Session != "s1" || r.CallID != "c1" {
		t.Errorf("brokerd got %+v", r)
	}
}

func TestClientPendingThenAnswer(t *testing.T) {
	exp := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	path, _ := fakeBroker(t, &wire.ToolPending{ID: 42, Tool: "read_file", Expires: exp},
		&wire.ToolResult{Status: wire.StatusDenied, Output: "refused by the owner", Label: dataclass.Label{Class: dataclass.Public}})
	var ids []int64
	o := (&Client{Path: path}).Call(context.Background(), req, func(id int64) { ids = append(ids, id) })
	if o.Status != wire.StatusDenied || o.Output != "refused by the owner" || len(ids) != 1 || ids[0] != 42 {
		t.Errorf("Call = %+v, pending %v", o, ids)
	}
}

func TestClientFailsClosed(t *testing.T) {
	for _, tt := range []struct {
		name    string
		answers []strict.Variant
		want    string
	}{
		{"error", []strict.Variant{&wire.Error{Op: "tool_request", Kind: wire.Forbidden, Msg: "no"}}, "brokerd refused the call (forbidden): no"},
		{"silent", nil, "brokerd did not answer"},
		{"wrong message", []strict.Variant{&wire.Approvals{Calls: []wire.PendingCall{}}}, "brokerd sent approvals on broker.sock"},
		{"bad expiry", []strict.Variant{&wire.ToolPending{ID: 1, Expires: "tomorrow"}}, "bad expiry"},
		{"pending then silent", []strict.Variant{&wire.ToolPending{ID: 1, Expires: time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}}, "brokerd did not answer"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path, _ := fakeBroker(t, tt.answers...)
			start := time.Now()
			o := (&Client{Path: path, Timeout: 300 * time.Millisecond}).Call(context.Background(), req, func(int64) {})
			if o.Status != wire.StatusDenied || !strings.Contains(o.Output, tt.want) || o.Class != dataclass.Public {
				t.Errorf("Call = %+v, want a denial containing %q", o, tt.want)
			}
			if time.Since(start) > 10*time.Second {
				t.Errorf("took %v: the deadline did not hold", time.Since(start))
			}
		})
	}
	o := (&Client{Path: filepath.Join(t.TempDir(), "none")}).Call(context.Background(), req, func(int64) {})
	if o.Status != wire.StatusDenied || !strings.Contains(o.Output, "see docs/runbook.md#broker-unavailable") {
		t.Errorf("Call with no brokerd = %+v", o)
	}
}

// TestClientPosted: brokerd's result comes back as it came (status and
// label), but a posted file only from a call that ran and only under an
// outbox id: loopd reads outbox/ by that id.
func TestClientPosted(t *testing.T) {
	const id = "0123456789abcdef0123456789abcdef"
	for _, tt := range []struct {
		name   string
		status wire.ToolStatus
		id     string
		kept   bool
	}{
		{"ran", wire.StatusRan, id, true},
		{"failed", wire.StatusFailed, id, false},
		{"denied", wire.StatusDenied, id, false},
		{"bad id", wire.StatusRan, "../../etc/passwd", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sent := &wire.ToolResult{Status: tt.status, Output: "x", Label: dataclass.Label{Class: dataclass.Private, Untrusted: true},
				Posted: &wire.PostedFile{ID: tt.id, Name: "a.txt", Size: 1}}
			path, _ := fakeBroker(t, sent)
			o := (&Client{Path: path}).Call(context.Background(), req, func(int64) {})
			if o.Status != tt.status || o.Label != sent.Label || (o.Posted != nil) != tt.kept {
				t.Errorf("Call = %+v (posted %v), want status %s, label %+v, posted kept %v", o, o.Posted, tt.status, sent.Label, tt.kept)
			}
		})
	}
}
