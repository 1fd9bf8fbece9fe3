package wire

// # MCP tools (broker.sock and admin.sock)
//
// loopd's find_tool asks brokerd on broker.sock for the MCP tools the
// owner pinned ([FindTools]); brokerd answers [FoundTools] from the pin
// files alone, never from a live server, each description neutralised.
// bxctl mcp pin asks on admin.sock for a server's live listing
// ([MCPList]); brokerd runs the server in a fresh container with no
// network (a remote server: a toolkit container whose only network is an
// egress proxy to the server's host) and answers [MCPListing] (the toolkit's listing, relayed: no
// role but the toolkit reads the server's own bytes), or an [*Error].

// FindTools asks brokerd for the pinned MCP tools (broker.sock).
type FindTools struct{}

// FoundTool is one pinned MCP tool as find_tool shows it. Parameters is
// its input schema's canonical JSON text.
type FoundTool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Parameters  string `json:"parameters"`
}

// FoundTools answers FindTools, in server then tool order.
type FoundTools struct {
	Tools []FoundTool `json:"tools"`
}

// MCPList asks brokerd for a declared server's live listing (admin.sock).
type MCPList struct {
	Server string `json:"server"`
}

// ListedTool is one tool of a live listing in pin form (package
// mcpserver's Tool): its schema canonical, its sum computed by the
// toolkit; bxctl recomputes every sum before it writes a pin.
type ListedTool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	InputSchema string `json:"input_schema"`
	SHA256      string `json:"sha256"`
}

// MCPListing answers MCPList: the server, the image the listing was taken
// from (or, for a remote server, "" and the https URL it was listed at),
// and its tools sorted by name.
type MCPListing struct {
	Server string       `json:"server"`
	Image  string       `json:"image"`
	URL    string       `json:"url,omitempty"`
	Tools  []ListedTool `json:"tools"`
}

// Tags.
func (*FindTools) Tag() string  { return "find_tools" }
func (*FoundTools) Tag() string { return "found_tools" }
func (*MCPList) Tag() string    { return "mcp_list" }
func (*MCPListing) Tag() string { return "mcp_listing" }
