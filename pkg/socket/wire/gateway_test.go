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
		`{"type":"owner_answer","id":1,"approve":true,"reason":"","approver":"mattermost:x"}`,
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

func TestParseApprovalCode(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"k7m2qx", "k7m2qx"}, {"K7M2QX", "k7m2qx"}, {"I0LOab", "101" + "0ab"},
		{"", ""}, {"k7m2q", ""}, {"k7m2qxx", ""}, {"k7m2qu", ""}, {"k7m 2q", ""}, {"k7m2q\u00e9", ""}, {"ǩ7m2qx", ""},
	} {
		got, err := ParseApprovalCode(tt.in)
		if got != tt.want || (err == nil) != (tt.want != "") {
			t.Errorf("ParseApprovalCode(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// FuzzParseApprovalCode: whatever a chat member types, a code read is
// canonical (reads as itself) and of the alphabet.
func FuzzParseApprovalCode(f *testing.F) {
	for _, s := range []string{"k7m2qx", "IIIIII", "ooOOoo", "", "\xff\xfe\xfd\xfc\xfb\xfa"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseApprovalCode(s)
		if err != nil {
			return
		}
		if again, err := ParseApprovalCode(c); err != nil || again != c || len(c) != ApprovalCodeLen {
			t.Fatalf("ParseApprovalCode(%q) = %q, which reads as %q, %v", s, c, again, err)
		}
		for _, r := range c {
			if !strings.ContainsRune(ApprovalCodeAlphabet, r) {
				t.Fatalf("ParseApprovalCode(%q) = %q holds %q", s, c, r)
			}
		}
	})
}
