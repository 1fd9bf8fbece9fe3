package mcppin

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// Call is what brokerd's runner gives the toolkit in an MCP container (as
// the args of package toolinput's envelope): the server's command (or,
// for a remote server, its https URL, and no command), and
// either the tool to call with its arguments and the pinned sums the live
// listing must match, or no tool, for a listing (bxctl mcp pin).
type Call struct {
	Server        string          `json:"server"`
	Command       []string        `json:"command,omitempty"`
	URL           string          `json:"url,omitempty"`
	Tool          string          `json:"tool,omitempty"`
	Arguments     json.RawMessage `json:"arguments,omitempty"`
	ToolSHA256    string          `json:"tool_sha256,omitempty"`
	ListingSHA256 string          `json:"listing_sha256,omitempty"`
}

// Remote reports whether the call is to a remote (Streamable HTTP) server.
func (c Call) Remote() bool { return c.URL != "" }

// Listing reports whether the call only lists the server's tools.
func (c Call) Listing() bool { return c.Tool == "" }

// ParseCall reads a Call strictly and checks its shape.
func ParseCall(raw []byte) (Call, error) {
	var c Call
	if err := strict.Unmarshal(raw, &c); err != nil {
		return Call{}, err
	}
	if c.URL != "" {
		if c.Command != nil {
			return Call{}, errors.New("a remote server's call has a url and no command")
		}
		if _, err := ParseRemoteURL(c.URL); err != nil {
			return Call{}, err
		}
	} else if err := CheckCommand(c.Command); err != nil {
		return Call{}, err
	}
	if !toolset.ServerPattern.MatchString(c.Server) {
		return Call{}, errors.New("server is not a server name")
	}
	if c.Listing() {
		if c.Arguments != nil || c.ToolSHA256 != "" || c.ListingSHA256 != "" {
			return Call{}, errors.New("a listing takes no arguments or sums")
		}
		return c, nil
	}
	if !toolset.MCPToolPattern.MatchString(c.Tool) || !isSum(c.ToolSHA256) || !isSum(c.ListingSHA256) || !isObject(c.Arguments) {
		return Call{}, errors.New("a call needs a tool name, both pinned sums and an arguments object")
	}
	return c, nil
}

var zeros = fmt.Sprintf("%064d", 0)

func isSum(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}

func isObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return strict.Unmarshal(raw, &m) == nil && m != nil
}

// The statuses of a [Result].
const (
	StatusOK        = "ok"         // the tool answered
	StatusToolError = "tool_error" // the tool answered with isError: its content says why
	StatusDrift     = "drift"      // the live listing differs from the pin: nothing was called
	StatusListing   = "listing"    // a listing: Listing holds it
	StatusFailed    = "failed"     // the server could not be started or spoken to: Detail says why
)

// Content is one item of a tool's result: text as the server gave it
// (capped), or for any other kind (image, audio, resource, link) a
// one-line description, never its data, until files and images are
// carried.
type Content struct {
	Type string `json:"type"` // text, or described
	Text string `json:"text"`
}

// Result is the one JSON object the toolkit prints on stdout in an MCP
// container. It is the toolkit's, not MCP's: brokerd reads this and never
// a server's own bytes.
type Result struct {
	Status  string    `json:"status"`
	Content []Content `json:"content"`
	// Truncated: the toolkit cut text past [MaxText].
	Truncated bool `json:"truncated"`
	// Detail says what drifted or failed (one line, the toolkit's words).
	Detail string `json:"detail,omitempty"`
	// Listing is the live listing for drift and listing, in pin form.
	Listing []Tool `json:"listing,omitempty"`
}

// MaxText caps the text of a result's content, all items together.
const MaxText = 256 << 10

// MaxResult caps the envelope brokerd reads (the runner's stdout cap is
// at least this).
const MaxResult = MaxText + MaxTools*(MaxDescription+MaxSchema+256) + 64<<10

// ParseResult reads the toolkit's envelope strictly, refusing one over
// [MaxResult], of an unknown status, with text over [MaxText], or with a
// listing that does not check (every sum recomputed).
func ParseResult(data []byte) (Result, error) {
	if len(data) > MaxResult {
		return Result{}, fmt.Errorf("mcp result: over %d bytes", MaxResult)
	}
	var r Result
	if err := strict.Unmarshal(data, &r); err != nil {
		return Result{}, fmt.Errorf("mcp result: %v", err)
	}
	if !slices.Contains([]string{StatusOK, StatusToolError, StatusDrift, StatusListing, StatusFailed}, r.Status) {
		return Result{}, errors.New("mcp result: unknown status")
	}
	n := 0
	for _, c := range r.Content {
		if c.Type != "text" && c.Type != "described" {
			return Result{}, errors.New("mcp result: unknown content type")
		}
		n += len(c.Text)
		if !utf8.ValidString(c.Text) {
			return Result{}, errors.New("mcp result: content is not UTF-8")
		}
	}
	if n > MaxText {
		return Result{}, fmt.Errorf("mcp result: content over %d bytes", MaxText)
	}
	if len(r.Listing) > 0 {
		if _, err := NewPin("checked", "sha256:"+zeros, r.Listing); err != nil {
			return Result{}, fmt.Errorf("mcp result: listing: %v", err)
		}
	}
	return r, nil
}
