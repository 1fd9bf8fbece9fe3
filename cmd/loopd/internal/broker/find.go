package broker

import (
	"context"
	"encoding/json"
	"time"

	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// Finder is a Port that can also list the MCP tools the owner pinned,
// for find_tool. A Port that is not one offers the built-in tools only.
type Finder interface {
	FindTools(ctx context.Context) ([]Found, error)
}

// Found is one pinned MCP tool: its name, its description (neutralised
// by brokerd) and its input schema, from the owner's pin file.
type Found struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// findTimeout bounds find_tool's question: brokerd answers from files.
const findTimeout = 10 * time.Second

var _ Finder = (*Client)(nil)

// FindTools implements Finder over broker.sock. A schema that is not a
// JSON object drops its tool (brokerd sends only canonical objects).
func (c *Client) FindTools(ctx context.Context) ([]Found, error) {
	ctx, cancel := context.WithTimeout(ctx, findTimeout)
	defer cancel()
	m, err := rpc.Ask[*wire.FoundTools](ctx, &wire.Broker, c.Path, &wire.FindTools{})
	if err != nil {
		return nil, err
	}
	var out []Found
	for _, t := range m.Tools {
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(t.Parameters), &obj) != nil || obj == nil {
			continue
		}
		out = append(out, Found{t.Name, t.Description, json.RawMessage(t.Parameters)})
	}
	return out, nil
}
