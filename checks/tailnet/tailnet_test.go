package tailnet

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
)

const policyPath = "../../deploy/tailnet-policy.hujson"

// allowed is what tag:boxmaker may reach: llama-server, Mattermost and
// Honcho on their ports, and nothing else (the grant placeholder is a
// comment until a grant names a tailnet host).
var allowed = []string{"honcho tcp:8000", "llama-server tcp:8080", "mattermost tcp:443"}

var tailnetRange = netip.MustParsePrefix("100.64.0.0/10")

func load(t *testing.T) ([]byte, Policy) {
	t.Helper()
	b, err := os.ReadFile(policyPath)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return b, p
}

// check is every way the example may fail its promise.
func check(p Policy) []string {
	var out []string
	if got := p.From("tag:boxmaker"); !slices.Equal(got, allowed) {
		out = append(out, "tag:boxmaker reaches "+strings.Join(got, ", ")+"; want exactly "+strings.Join(allowed, ", "))
	}
	if src := p.To("tag:boxmaker"); len(src) > 0 {
		out = append(out, "tag:boxmaker is reachable from "+strings.Join(src, ", "))
	}
	if owners := p.TagOwners["tag:boxmaker"]; !slices.Equal(owners, []string{"autogroup:admin"}) {
		out = append(out, "tag:boxmaker is owned by "+strings.Join(owners, ", "))
	}
	for _, g := range p.Grants {
		for _, d := range g.Dst {
			a, err := netip.ParseAddr(p.Hosts[d])
			if err != nil || !tailnetRange.Contains(a) {
				out = append(out, d+" is not a host alias with one tailnet address")
			}
		}
	}
	var accepts []string
	for _, tt := range p.Tests {
		if tt.Src == "tag:boxmaker" {
			accepts = append(accepts, tt.Accept...)
			if len(tt.Deny) == 0 {
				out = append(out, "the policy's test denies nothing")
			}
		}
	}
	var want []string
	for _, a := range allowed {
		host, ip, _ := strings.Cut(a, " ")
		want = append(want, host+":"+strings.TrimPrefix(ip, "tcp:"))
	}
	slices.Sort(accepts)
	if !slices.Equal(accepts, want) {
		out = append(out, "the policy's own test accepts "+strings.Join(accepts, ", ")+"; want "+strings.Join(want, ", "))
	}
	return out
}

func TestExamplePolicy(t *testing.T) {
	_, p := load(t)
	for _, problem := range check(p) {
		t.Error(problem)
	}
}

// TestLoosenedPolicyIsCaught: each widening of the example fails check.
func TestLoosenedPolicyIsCaught(t *testing.T) {
	for name, edit := range map[string]func(string) string{
		"any port": func(s string) string { return strings.Replace(s, `"ip": ["tcp:8080"]`, `"ip": ["*"]`, 1) },
		"everyone": func(s string) string {
			return strings.Replace(s, `"grants": [`, `"grants": [{"src": ["*"], "dst": ["*"], "ip": ["*"]},`, 1)
		},
		"the placeholder on": func(s string) string {
			return strings.Replace(strings.Replace(s, `// {"src": ["tag:boxmaker"], "dst": ["forge"]`, `{"src": ["tag:boxmaker"], "dst": ["forge"]`, 1), `// "forge":`, `"forge":`, 1)
		},
		"inbound": func(s string) string {
			return strings.Replace(s, `"grants": [`, `"grants": [{"src": ["autogroup:member"], "dst": ["tag:boxmaker"], "ip": ["tcp:22"]},`, 1)
		},
		"an acls section": func(s string) string {
			return strings.Replace(s, `"grants": [`, `"acls": [{"action": "accept", "src": ["*"], "dst": ["*:*"]}], "grants": [`, 1)
		},
	} {
		t.Run(name, func(t *testing.T) {
			b, _ := load(t)
			edited := edit(string(b))
			if edited == string(b) {
				t.Fatal("the edit did not apply: the example changed")
			}
			p, err := Parse([]byte(edited))
			if err == nil && len(check(p)) == 0 {
				t.Error("a loosened policy passed")
			}
		})
	}
}

func TestStandardize(t *testing.T) {
	in := "{\n // a comment with \"quotes\"\n \"a\": \"http://x/*y*/\", /* block */ \"b\": [1, 2,],\n \"c\": {\"d\": \"e\\\",\",},\n}\n"
	out, err := Standardize([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if v["a"] != "http://x/*y*/" || v["c"].(map[string]any)["d"] != `e",` {
		t.Errorf("strings changed: %v", v)
	}
	for _, bad := range []string{`{"a": "open`, `{ /* open`} {
		if _, err := Standardize([]byte(bad)); err == nil {
			t.Errorf("Standardize(%q) accepted it", bad)
		}
	}
}

// FuzzStandardize: it never panics, and JSON without commas before a
// closing bracket comes out as it went in.
func FuzzStandardize(f *testing.F) {
	b, _ := os.ReadFile(policyPath)
	f.Add(b)
	f.Add([]byte(`{"a": "//", "b": [1, 2]}`))
	f.Add([]byte(`"\\"`))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Standardize(in)
		if err != nil || !json.Valid(in) {
			return
		}
		var x, y any
		if json.Unmarshal(in, &x) != nil || json.Unmarshal(out, &y) != nil {
			t.Fatalf("valid JSON %q became %q", in, out)
		}
		xb, _ := json.Marshal(x)
		yb, _ := json.Marshal(y)
		if !bytes.Equal(xb, yb) {
			t.Fatalf("JSON %q changed to %q", in, out)
		}
	})
}
