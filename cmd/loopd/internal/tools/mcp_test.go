package tools

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestFindPinnedMCPTools: find_tool shows the pinned MCP tools brokerd
// sent beside the built-in ones, matched by the same words, and
// call_tool takes their names (brokerd decides them).
func TestFindPinnedMCPTools(t *testing.T) {
	mcp := []Entry{{Name: "mcp.everything.echo", Description: "Echoes back the input.", Parameters: json.RawMessage(`{"type":"object"}`)}}
	got, err := Find(`{"query":"echo"}`, mcp)
	if err != nil || !strings.Contains(got, `"name":"mcp.everything.echo"`) || strings.Contains(got, `"name":"shell"`) {
		t.Errorf("Find(echo) = %s, %v; want the MCP tool only", got, err)
	}
	got, err = Find(`{"query":"read"}`, mcp)
	if err != nil || strings.Contains(got, "mcp.everything.echo") {
		t.Errorf("Find(read) = %s, %v; want no MCP tool", got, err)
	}
	if c, err := ParseCall(`{"name":"mcp.everything.echo","arguments":{"message":"hi"}}`); err != nil || c.Name != "mcp.everything.echo" {
		t.Errorf("ParseCall(mcp) = %+v, %v", c, err)
	}
	for _, bad := range []string{"mcp.Everything.echo", "mcp.everything", "mcp..echo", "mcp.everything.echo!"} {
		if _, err := ParseCall(`{"name":"` + bad + `","arguments":{}}`); err == nil {
			t.Errorf("ParseCall(%s) succeeded", bad)
		}
	}
}
