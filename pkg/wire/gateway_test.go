package wire

import (
	"strings"
	"testing"
)

// gateway.sock's union joins the golden test from here, so that the
// list in wire_test.go stays as other sockets' changes left it.
func init() { unions["gateway"] = GatewayMessages }

func TestGatewayRefusals(t *testing.T) {
	for _, in := range []string{
		`{"type":"send","session":"s","text":"x"}`,
		`{"type":"approve","id":1}`,
		`{"type":"owner_answer","id":1,"approve":true,"reason":""}`,
		`{"type":"owner_answer","id":1,"approve":"yes","reason":"","approver":"mattermost:x"}`,
	} {
		if _, err := GatewayMessages.Decode([]byte(in)); err == nil {
			t.Errorf("Decode(%s) accepted", in)
		}
	}
	if _, err := LoopRequests.Decode([]byte(`{"type":"stop","session":"s","now":true}`)); err == nil || !strings.Contains(err.Error(), "now") {
		t.Errorf("stop with an unknown field: %v", err)
	}
}
