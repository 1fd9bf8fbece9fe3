package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/checks/mcptest"
	"wntrmute.dev/boxmaker/checks/podmantest"
)

// TestStackMCPTool is an MCP tool end to end over real processes and
// real Podman: the owner pins the test server with `bxctl mcp pin`, a
// chat turn finds its tool with find_tool (from the pin) and calls it
// with call_tool under an auto grant, and the result reaches the model and
// the session log neutralised (no chat-template markup), labelled with the
// grant's class and untrusted; `bxctl audit verify` finds the chain
// intact and the result names the pin.
//
// Not parallel: it shares the Podman service and asserts no container is
// left, as TestStackToolRuns does.
func TestStackMCPTool(t *testing.T) {
	svc := podmantest.Require(t)
	shareWithBrokerd(t, svc.Socket)
	image := svc.ToolImage(t)
	server := mcptest.ServerImage(t, svc)
	bin, state, srv := stack(t, 65536)
	os.MkdirAll(filepath.Join(state, "grants"), 0o700)
	os.MkdirAll(filepath.Join(state, "mcp"), 0o700)
	os.WriteFile(filepath.Join(state, "grants", "mcp.toml"), []byte(
		"[[grant]]\nid = \"markup\"\ntool = \"mcp.test.markup\"\nmax_taint = \"secret\"\nresult_class = \"secret\"\nmode = \"auto\"\n"), 0o600)
	os.WriteFile(filepath.Join(state, "mcp", "test.toml"), []byte(fmt.Sprintf(
		"image = %q\ncommand = [%q, \"pinned\"]\n", server, mcptest.ServerPath)), 0o600)
	os.WriteFile(filepath.Join(state, "config", "brokerd.toml"), []byte(fmt.Sprintf(
		"[runner]\npodman_socket = %q\ntool_image = %q\n", svc.Socket, image)), 0o600)
	srv.Script(
		fake.Reply{Reasoning: "Find it.", ToolCalls: []fake.ToolCall{{Name: "find_tool", Arguments: `{"query":"markup"}`}}},
		fake.Reply{Reasoning: "Call it.", ToolCalls: []fake.ToolCall{{Name: "call_tool", Arguments: `{"name":"mcp.test.markup","arguments":{}}`}}},
		fake.Reply{Reasoning: "Done.", Content: "It said done."},
	)
	up(t, bin, state, srv)

	shown, err := bxctl(t, bin, "mcp", "pin", "--state", state, "test")
	sum := regexp.MustCompile(`--expect ([0-9a-f]{64})`).FindStringSubmatch(shown)
	if err != nil || sum == nil {
		t.Fatalf("bxctl mcp pin: %v\n%s", err, shown)
	}
	if out, err := bxctl(t, bin, "mcp", "pin", "--state", state, "--write", "--expect", sum[1], "test"); err != nil {
		t.Fatalf("bxctl mcp pin --write: %v\n%s", err, out)
	}

	if out := chat(t, bin, state, "s1", "use the markup tool"); !strings.Contains(out, "It said done.") {
		t.Fatalf("chat = %q", out)
	}
	reqs := srv.Requests(0)
	if second := string(reqs[1]); !strings.Contains(second, "mcp.test.markup") {
		t.Errorf("find_tool's answer lacks the pinned tool; the model was sent:\n%s", second)
	}
	last := string(reqs[len(reqs)-1])
	if !strings.Contains(last, "done.") || strings.Contains(last, "<|im_start|>") {
		t.Errorf("the model was sent the result with its markup, or not at all:\n%s", last)
	}
	log, _ := os.ReadFile(filepath.Join(state, "sessions", "s1", "0.jsonl"))
	if !strings.Contains(string(log), `"class":"secret","untrusted":true`) || strings.Contains(string(log), "<|im_start|>") {
		t.Errorf("session log lacks the labelled, neutralised result:\n%s", log)
	}
	if verify, err := bxctl(t, bin, "audit", "verify", filepath.Join(state, "broker", "audit")); err != nil || !strings.Contains(verify, "2 records") {
		t.Errorf("bxctl audit verify: %v %s; want the decision and its result", err, verify)
	}
	logs, _ := filepath.Glob(filepath.Join(state, "broker", "audit", "*.jsonl"))
	var audit []byte
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		audit = append(audit, b...)
	}
	if !strings.Contains(string(audit), `"mcp_pin":"`+sum[1]+`"`) {
		t.Errorf("the audit result does not name the pin %s:\n%s", sum[1], audit)
	}
	// brokerd removes the call's container just after its answer.
	if left, err := svc.Remaining(); err != nil || len(left) > 0 {
		t.Errorf("containers left behind: %q %v", left, err)
	}
}
