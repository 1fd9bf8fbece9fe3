package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/sanitize"
	"wntrmute.dev/boxmaker/pkg/tool/mcpserver"
)

// mcpCatalog loads the owner's MCP servers and pins from the directory
// beside the grants, afresh for every decision as the grants are. An
// invalid directory is logged and yields an invalid catalog, under which
// every MCP call is refused (mcp_unpinned); the built-in tools go on.
func (b *Broker) mcpCatalog() *mcpserver.Catalog {
	cat, err := mcpserver.LoadDir(b.cfg.MCPDir(), b.cfg.Owners())
	if err != nil {
		b.log.Error("MCP servers are invalid; every MCP call is refused; see docs/runbook.md#mcp-invalid", "err", err.Error())
	}
	return cat
}

// findTools answers find_tool's question on broker.sock: the pinned MCP
// tools, from the pin files alone (a live server is never asked), every
// string of their descriptions and schemas neutralised (package
// sanitize), since a server's author wrote them: the owner read them
// escaped before pinning, but chat-template markup in them must still
// never reach the model as markup.
func (b *Broker) findTools(_ context.Context, _ sockets.Peer, _ *wire.FindTools) strict.Variant {
	out := &wire.FoundTools{Tools: []wire.FoundTool{}}
	for _, t := range b.mcpCatalog().Tools() {
		schema, err := neutraliseJSON(t.InputSchema)
		if err != nil {
			continue // a pin's schema is canonical JSON (ParsePin checked it)
		}
		out.Tools = append(out.Tools, wire.FoundTool{Name: t.Name, Description: sanitize.Neutralise(t.Description), Parameters: schema})
	}
	return out
}

// neutraliseJSON neutralises every key and string of a JSON text,
// keeping numbers as written.
func neutraliseJSON(text string) (string, error) {
	d := json.NewDecoder(strings.NewReader(text))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return "", err
	}
	var walk func(any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case string:
			return sanitize.Neutralise(v)
		case []any:
			for i := range v {
				v[i] = walk(v[i])
			}
		case map[string]any:
			m := make(map[string]any, len(v))
			for k, x := range v {
				m[sanitize.Neutralise(k)] = walk(x)
			}
			return m
		}
		return v
	}
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(walk(v)); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}
