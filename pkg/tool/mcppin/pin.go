// Package mcppin is the vocabulary brokerd, bxctl and the toolkit share
// about MCP servers' tools: the pin of a server's listing (pin.go) and
// the envelope of one MCP call between brokerd's runner and the toolkit
// (envelope.go). It links no TOML, no file access and no secret, so the
// toolkit can share it; package mcpserver reads the owner's files.
//
// # Invariants
//
//   - A [Pin] is made only by [NewPin], [NewRemotePin] or [ParsePin], and its sums always
//     agree with its text: ParsePin recomputes every tool's sum and the
//     listing's and refuses a file whose sums differ, so a pin edited by
//     hand cannot show find_tool one description and check another.
//   - A tool's sum covers its description and its input schema in
//     canonical form ([CanonicalSchema]); the listing's sum covers every
//     tool's name and sum, so a rename, an added or a removed tool changes
//     it. The same functions compute the pin (bxctl mcp pin, through
//     brokerd and the toolkit) and the live check in the container.
//   - [ParseResult] accepts only the toolkit's own strict, capped
//     envelope; brokerd never reads a server's bytes.
package mcppin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// Caps on what a server may list: a pin is read into every find_tool
// answer, and a listing is what a hostile server controls.
const (
	MaxTools       = 128
	MaxDescription = 8 << 10
	MaxSchema      = 32 << 10
	MaxPinSize     = 8 << 20
)

// Tool is one pinned tool: its name, description and input schema as the
// server listed them (the schema in canonical form), and their sum.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	InputSchema string `json:"input_schema"` // canonical JSON text: a string, so that the pin file holds no float
	SHA256      string `json:"sha256"`
}

// Pin is a server's pinned listing, the JSON of NAME.pin.json:
//
//	{"server": NAME, "image": "sha256:…", "listing_sha256": "…",
//	 "tools": [{"name": …, "description": …, "input_schema": "{…}", "sha256": …}, …]}
//
// tools are sorted by name. image is the image the listing was taken
// from: a declaration naming another image is unpinned until re-pinned.
// A remote server's pin holds "url" (the https URL it was listed at)
// instead of "image", under the same rule: a declaration naming another
// URL is unpinned until re-pinned.
type Pin struct {
	Server        string `json:"server"`
	Image         string `json:"image,omitempty"`
	URL           string `json:"url,omitempty"`
	ListingSHA256 string `json:"listing_sha256"`
	Tools         []Tool `json:"tools"`
}

// Lookup returns the pinned tool named name.
func (p *Pin) Lookup(name string) (Tool, bool) {
	i := slices.IndexFunc(p.Tools, func(t Tool) bool { return t.Name == name })
	if i < 0 {
		return Tool{}, false
	}
	return p.Tools[i], true
}

// CanonicalSchema is an input schema's canonical form: one JSON object
// with keys sorted at every depth, numbers as written, no insignificant
// space and no HTML escaping. It refuses anything but an object, and
// duplicate keys (two readers could read them two ways).
func CanonicalSchema(raw []byte) (string, error) {
	var m map[string]json.RawMessage
	if err := strict.Unmarshal(raw, &m); err != nil {
		return "", fmt.Errorf("input schema: not one JSON object with unique keys: %v", err)
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return "", fmt.Errorf("input schema: %v", err)
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return "", fmt.Errorf("input schema: %v", err)
	}
	out := strings.TrimSuffix(b.String(), "\n")
	if len(out) > MaxSchema {
		return "", fmt.Errorf("input schema: over %d bytes", MaxSchema)
	}
	return out, nil
}

// ToolSum is the SHA-256 of a tool's description and canonical schema.
func ToolSum(description, schema string) string {
	b, _ := strict.Marshal(struct {
		Description string `json:"description"`
		InputSchema string `json:"input_schema"`
	}{description, schema})
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// ListingSum is the SHA-256 of every tool's name and sum, sorted by name.
func ListingSum(tools []Tool) string {
	pairs := make([][2]string, len(tools))
	for i, t := range tools {
		pairs[i] = [2]string{t.Name, t.SHA256}
	}
	slices.SortFunc(pairs, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	b, _ := strict.Marshal(pairs)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Listed is one tool as a live listing gave it: its schema raw.
type Listed struct {
	Name        string
	Description string
	InputSchema []byte
}

// NewListing checks a live listing and gives each tool its canonical
// schema and sum, sorted by name. It refuses what could not be pinned:
// more than [MaxTools] tools, a name outside toolset.MCPToolPattern, a
// name listed twice, a description over [MaxDescription] bytes or not
// UTF-8, a schema that is not one object.
func NewListing(listed []Listed) ([]Tool, error) {
	if len(listed) > MaxTools {
		return nil, fmt.Errorf("the server lists %d tools, more than %d", len(listed), MaxTools)
	}
	var out []Tool
	for _, l := range listed {
		if !toolset.MCPToolPattern.MatchString(l.Name) {
			return nil, fmt.Errorf("tool name %q is not 1 to 64 letters, digits, '_', '-' or '.'", l.Name)
		}
		if slices.ContainsFunc(out, func(t Tool) bool { return t.Name == l.Name }) {
			return nil, fmt.Errorf("tool %q is listed twice", l.Name)
		}
		if len(l.Description) > MaxDescription || !utf8.ValidString(l.Description) {
			return nil, fmt.Errorf("tool %q: the description is over %d bytes or not UTF-8", l.Name, MaxDescription)
		}
		schema, err := CanonicalSchema(l.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("tool %q: %v", l.Name, err)
		}
		out = append(out, Tool{Name: l.Name, Description: l.Description, InputSchema: schema, SHA256: ToolSum(l.Description, schema)})
	}
	slices.SortFunc(out, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// NewPin makes the pin of server's listing tools (from [NewListing])
// taken from image.
func NewPin(server, image string, tools []Tool) (Pin, error) {
	return newPin(Pin{Server: server, Image: image}, tools)
}

// NewRemotePin makes the pin of remote server's listing tools taken at
// the https URL url.
func NewRemotePin(server, url string, tools []Tool) (Pin, error) {
	return newPin(Pin{Server: server, URL: url}, tools)
}

// newPin completes p, bound to its image or URL, with tools and their
// listing's sum, and checks it as ParsePin would.
func newPin(p Pin, tools []Tool) (Pin, error) {
	p.Tools = slices.Clone(tools)
	if p.Tools == nil {
		p.Tools = []Tool{}
	}
	p.ListingSHA256 = ListingSum(p.Tools)
	if err := p.check(); err != nil {
		return Pin{}, err
	}
	return p, nil
}

// ImagePattern is an image ID as brokerd.toml's tool_image writes it.
var ImagePattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// MaxArgs caps a server's command line.
const MaxArgs = 64

// CheckCommand checks a server's argv: 1 to MaxArgs arguments, an
// absolute program, no NUL, none over 4096 bytes.
func CheckCommand(cmd []string) error {
	switch {
	case len(cmd) == 0:
		return errors.New("command is missing: the server's program and its arguments, as a list")
	case len(cmd) > MaxArgs:
		return fmt.Errorf("command has %d arguments, more than %d", len(cmd), MaxArgs)
	case !strings.HasPrefix(cmd[0], "/"):
		return fmt.Errorf("command's program %q is not an absolute path: the container has no search path the owner chose", cmd[0])
	}
	for _, a := range cmd {
		if strings.ContainsRune(a, 0) || len(a) > 4096 {
			return errors.New("command: an argument holds a NUL byte or is longer than 4096 bytes")
		}
	}
	return nil
}

// check recomputes every sum and checks every value.
func (p *Pin) check() error {
	if !toolset.ServerPattern.MatchString(p.Server) {
		return fmt.Errorf("server %q is not a server name", p.Server)
	}
	switch {
	case p.URL != "" && p.Image != "":
		return errors.New("a pin holds an image (a server run from its image) or a url (a remote server), not both")
	case p.URL != "":
		if _, err := ParseRemoteURL(p.URL); err != nil {
			return err
		}
	case !ImagePattern.MatchString(p.Image):
		return fmt.Errorf("image %q is not an image ID", p.Image)
	}
	listed := make([]Listed, len(p.Tools))
	for i, t := range p.Tools {
		listed[i] = Listed{t.Name, t.Description, []byte(t.InputSchema)}
	}
	again, err := NewListing(listed)
	if err != nil {
		return err
	}
	for i, t := range again {
		if p.Tools[i] != t {
			return fmt.Errorf("tool %q: its schema is not in canonical form, its sum is not its text's, or the tools are not sorted by name", p.Tools[i].Name)
		}
	}
	if ListingSum(p.Tools) != p.ListingSHA256 {
		return errors.New("listing_sha256 is not the sum of the tools listed")
	}
	return nil
}

// ParsePin reads a pin file strictly and checks every sum against the
// text it covers.
func ParsePin(data []byte) (Pin, error) {
	if len(data) > MaxPinSize {
		return Pin{}, fmt.Errorf("pin: over %d bytes", MaxPinSize)
	}
	var p Pin
	if err := strict.Unmarshal(data, &p); err != nil {
		return Pin{}, fmt.Errorf("pin: %v", err)
	}
	if p.Tools == nil {
		return Pin{}, errors.New("pin: tools is null")
	}
	if err := p.check(); err != nil {
		return Pin{}, fmt.Errorf("pin: %v", err)
	}
	return p, nil
}

// Encode writes the pin file's text: indented, for the owner to read and
// diff, ending in a newline.
func (p Pin) Encode() ([]byte, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	b, err := strict.Marshal(p)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}
