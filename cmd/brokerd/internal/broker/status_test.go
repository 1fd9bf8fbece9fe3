package broker

import (
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// TestStatusSummaryOnBrokerSock: loopd's BrokerStatusQuery on
// broker.sock lists a pending approval and an allowance in force by id,
// session, tool and expiry, and never the approval's code or arguments.
func TestStatusSummaryOnBrokerSock(t *testing.T) {
	h := start(t, grants)
	allowed, _ := h.approveSession(t, 0, wire.ScopeSession)
	c := h.readIn(t, 0, `{"path":"/home/owner/Downloads/other.pdf"}`)
	p, ok := c.Recv().(*wire.ToolPending)
	if !ok {
		t.Fatal("the second call did not ask")
	}
	admin := h.dial(t, h.cfg.AdminSocketDir, &wire.Admin)
	admin.Send(&wire.GetApproval{ID: p.ID})
	code := admin.Recv().(*wire.Approval).Call.Code

	q := h.dial(t, h.cfg.BrokerSocketDir, &wire.Broker)
	q.Send(&wire.BrokerStatusQuery{})
	st, ok := q.Recv().(*wire.BrokerStatus)
	if !ok {
		t.Fatal("broker.sock did not answer broker_status_query")
	}
	if st.Version == "" || len(st.Approvals) != 1 || st.Approvals[0].ID != p.ID || st.Approvals[0].Tool != "read_file" || st.Approvals[0].Session != "s1" || st.Approvals[0].Expires == "" {
		t.Errorf("approvals = %+v (version %q), want #%d read_file in s1", st.Approvals, st.Version, p.ID)
	}
	if len(st.Allowances) != 1 || st.Allowances[0].ID != allowed || st.Allowances[0].Tool != "read_file" || !strings.Contains(st.Allowances[0].Scope, "report.pdf") {
		t.Errorf("allowances = %+v, want #%d", st.Allowances, allowed)
	}
	b, err := strict.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), code) || strings.Contains(string(b), "other.pdf") {
		t.Errorf("the summary carries the approval's code or arguments: %s", b)
	}
}
