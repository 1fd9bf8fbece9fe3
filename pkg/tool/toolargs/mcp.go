package toolargs

import (
	"encoding/json"
	"errors"
	"slices"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

// MaxMCPArgs caps an MCP tool call's arguments.
const MaxMCPArgs = 256 << 10

// MCP is a call of an MCP tool (toolset.IsMCP): its full name and its
// arguments, one JSON object with no duplicate keys. Their meaning is the
// server's: brokerd decides an MCP call on its name and the grant alone,
// and the server checks them against its own schema.
type MCP struct {
	Name string
	Raw  json.RawMessage
}

// Tool implements Args.
func (m MCP) Tool() string { return m.Name }

// MarshalJSON writes the arguments as the model wrote them.
func (m MCP) MarshalJSON() ([]byte, error) {
	if len(m.Raw) == 0 {
		return nil, errors.New("marshal mcp arguments: empty")
	}
	return slices.Clone(m.Raw), nil
}

func parseMCP(tool string, raw []byte) (Args, error) {
	if len(raw) > MaxMCPArgs {
		return nil, errors.New("arguments: over 256 KiB")
	}
	var obj map[string]json.RawMessage
	if err := strict.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, errors.New("arguments: want an object")
	}
	return MCP{tool, slices.Clone(json.RawMessage(raw))}, nil
}
