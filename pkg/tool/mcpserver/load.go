package mcpserver

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"wntrmute.dev/boxmaker/pkg/host/config"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/ownership"
	"wntrmute.dev/boxmaker/pkg/text/escape"
	"wntrmute.dev/boxmaker/pkg/tool/mcppin"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// DirBeside is the mcp directory beside the grant directory grants.
func DirBeside(grants string) string {
	return filepath.Join(filepath.Dir(filepath.Clean(grants)), layout.MCP.Path)
}

// PinFile is the name of server's pin file.
func PinFile(server string) string { return server + ".pin.json" }

// Entry is a declared server and its pin, if it has a valid one for the
// declared image.
type Entry struct {
	Server Server
	Pin    *mcppin.Pin // nil: unpinned
	Why    string      // why Pin is nil: no pin file, or a pin of another image
}

// Catalog is a loaded mcp directory. Only [LoadDir] makes a valid one.
type Catalog struct {
	entries []Entry // sorted by server name
	ok      bool
}

// Valid reports whether c came from a [LoadDir] that found no problem.
func (c *Catalog) Valid() bool { return c != nil && c.ok }

// Entries are the declared servers, sorted by name.
func (c *Catalog) Entries() []Entry {
	if !c.Valid() {
		return nil
	}
	return slices.Clone(c.entries)
}

// Lookup finds server's entry.
func (c *Catalog) Lookup(server string) (Entry, bool) {
	if !c.Valid() {
		return Entry{}, false
	}
	i := slices.IndexFunc(c.entries, func(e Entry) bool { return e.Server.name == server })
	if i < 0 {
		return Entry{}, false
	}
	return c.entries[i], true
}

// Found is one MCP tool as find_tool shows it: its full name, and its
// description and schema from the pin, never from a live server.
type Found struct {
	Name        string
	Description string
	InputSchema string
}

// Tools lists every pinned tool of every pinned server, in order.
func (c *Catalog) Tools() []Found {
	var out []Found
	for _, e := range c.Entries() {
		if e.Pin == nil {
			continue
		}
		for _, t := range e.Pin.Tools {
			out = append(out, Found{toolset.MCPName(e.Server.name, t.Name), t.Description, t.InputSchema})
		}
	}
	return out
}

// NewCatalog makes a valid catalog from entries (tests, and brokerd's
// callers that already hold parsed servers); names must be unique.
func NewCatalog(entries ...Entry) (*Catalog, error) {
	c := &Catalog{ok: true}
	for _, e := range entries {
		if !e.Server.Valid() {
			return nil, errors.New("catalog: a server was not made by ParseServer")
		}
		if _, dup := c.Lookup(e.Server.name); dup {
			return nil, fmt.Errorf("catalog: server %q twice", e.Server.name)
		}
		c.entries = append(c.entries, e)
	}
	slices.SortFunc(c.entries, func(a, b Entry) int { return strings.Compare(a.Server.name, b.Server.name) })
	return c, nil
}

// LoadError is an invalid mcp directory: every problem found.
type LoadError struct {
	Dir      string
	Problems []string
}

func (e *LoadError) Error() string {
	return fmt.Sprintf("MCP servers in %s are invalid (%d problems): %s; every MCP call is refused until they are fixed; see docs/runbook.md#mcp-invalid",
		e.Dir, len(e.Problems), escape.Line(e.Problems[0]))
}

// LoadDir loads the mcp directory dir under the grants' ownership rule
// (owners). A missing directory is a valid catalog with no servers: MCP
// is optional. Any other problem makes the catalog invalid.
func LoadDir(dir string, owners ownership.Owners) (*Catalog, error) {
	fail := func(ps ...string) (*Catalog, error) { return &Catalog{}, &LoadError{Dir: dir, Problems: ps} }
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return &Catalog{ok: true}, nil
	}
	if _, err := owners.Check(dir); err != nil {
		return fail(reason(dir, err))
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fail(fmt.Sprintf("%s: cannot read: %v", dir, err))
	}
	var problems []string
	servers := map[string]Server{}
	pins := map[string]mcppin.Pin{}
	for _, d := range ents {
		name, full := d.Name(), filepath.Join(dir, d.Name())
		var server string
		isPin := false
		switch {
		case strings.HasSuffix(name, ".md"):
			continue
		case strings.HasSuffix(name, ".pin.json"):
			server, isPin = strings.TrimSuffix(name, ".pin.json"), true
		case strings.HasSuffix(name, ".toml"):
			server = strings.TrimSuffix(name, ".toml")
		default:
			problems = append(problems, full+": not a server (NAME.toml), a pin (NAME.pin.json) or documentation (*.md); move it out of the mcp directory")
			continue
		}
		data, err := owners.ReadFile(full, config.MaxSize*8)
		if err != nil {
			problems = append(problems, reason(full, err))
			continue
		}
		if isPin {
			p, err := mcppin.ParsePin(data)
			switch {
			case err != nil:
				problems = append(problems, full+": "+err.Error())
			case p.Server != server:
				problems = append(problems, fmt.Sprintf("%s: the pin is of server %q, not %q", full, p.Server, server))
			default:
				pins[server] = p
			}
			continue
		}
		s, err := ParseServer(server, full, data)
		if err != nil {
			problems = append(problems, full+": "+err.Error())
			continue
		}
		servers[server] = s
	}
	for name := range pins {
		if _, ok := servers[name]; !ok {
			problems = append(problems, filepath.Join(dir, PinFile(name))+": a pin with no declaration "+name+".toml beside it")
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return fail(problems...)
	}
	var entries []Entry
	for name, s := range servers {
		e := Entry{Server: s}
		p, ok := pins[name]
		switch {
		case !ok:
			e.Why = "it has no pin file " + PinFile(name)
		case p.Image != s.image || p.URL != s.url.String():
			e.Why = "its pin was taken from " + pinSource(p) + ", not the declared " + s.Source()
		default:
			e.Pin = &p
		}
		entries = append(entries, e)
	}
	return NewCatalog(entries...)
}

func pinSource(p mcppin.Pin) string {
	if p.URL != "" {
		return "url " + p.URL
	}
	return "image " + p.Image
}

func reason(path string, err error) string {
	var ue *ownership.UnsafeError
	if errors.As(err, &ue) {
		return ue.Explain() + ": only root and the owner may write an MCP server file or a directory above it (see docs/runbook.md#owner-file-unsafe)"
	}
	return path + ": " + err.Error()
}
