package turn

import (
	"context"

	"wntrmute.dev/boxmaker/cmd/loopd/internal/broker"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/tools"
)

// pinnedTools asks brokerd for the MCP tools the owner pinned, for
// find_tool. A broker that cannot list them, or does not answer, leaves
// the built-in catalog: find_tool still works, and call_tool's answer
// says why an MCP tool cannot run.
func (e *Engine) pinnedTools(ctx context.Context) []tools.Entry {
	f, ok := e.Broker.(broker.Finder)
	if !ok {
		return nil
	}
	found, err := f.FindTools(ctx)
	if err != nil {
		return nil
	}
	out := make([]tools.Entry, len(found))
	for i, t := range found {
		out[i] = tools.Entry{Name: t.Name, Description: t.Description, Parameters: t.Parameters}
	}
	return out
}
