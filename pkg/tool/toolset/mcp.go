package toolset

import (
	"regexp"
	"strings"
)

// MCP tools are a family in the list rather than fixed names: each tool a
// server the owner declared (package mcppin) pinned is named
// "mcp.<server>.<tool>", found through find_tool, called through
// call_tool and decided by grants that name it exactly (package grant).
// They are of [ClassMCP]: granted, but run in the server's own image
// with the toolkit mounted beside it, not in the tool image.
const MCPPrefix = "mcp."

// ClassMCP is the class of the MCP tools: decided by the owner's grants,
// run by brokerd's runner in a fresh container of the server's image.
const ClassMCP Class = ClassMemory + 1

// ServerPattern is what an MCP server's name looks like: it is a file
// name in the owner's mcp directory and a part of every tool name, so it
// holds no dot.
var ServerPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// MCPToolPattern is what a pinned MCP tool's name may be: the MCP
// specification's tool name characters (letters, digits, '_', '-', '.'),
// at most 64 of them. A server listing a tool named otherwise cannot be
// pinned.
var MCPToolPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)

// MCPName is the name the model and grants use for tool of server. It
// does not check its parts; [SplitMCP] does.
func MCPName(server, tool string) string { return MCPPrefix + server + "." + tool }

// SplitMCP parses an MCP tool's name into its server and tool, and is
// false for any name that is not one (a built-in tool's included).
func SplitMCP(name string) (server, tool string, ok bool) {
	rest, found := strings.CutPrefix(name, MCPPrefix)
	if !found {
		return "", "", false
	}
	server, tool, found = strings.Cut(rest, ".")
	if !found || !ServerPattern.MatchString(server) || !MCPToolPattern.MatchString(tool) {
		return "", "", false
	}
	return server, tool, true
}

// IsMCP reports whether name is a well-formed MCP tool name.
func IsMCP(name string) bool {
	_, _, ok := SplitMCP(name)
	return ok
}
