package mcpserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/ownership"
	"wntrmute.dev/boxmaker/pkg/tool/mcppin"
)

const image = "sha256:8f1c0a6b9e2d4c3f5a7b8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c"

func TestParseServer(t *testing.T) {
	good := "image = \"" + image + "\"\ncommand = [\"/usr/bin/node\", \"/opt/mcp/everything/dist/index.js\"]\n"
	s, err := ParseServer("everything", "everything.toml", []byte(good))
	if err != nil || s.Name() != "everything" || s.Image() != image || len(s.Command()) != 2 || s.Secret() != "" {
		t.Fatalf("ParseServer(good) = %+v, %v", s, err)
	}
	for _, tt := range []struct{ name, text, want string }{
		{"Bad_Name", good, "server name"},
		{"a.b", good, "server name"},
		{"x", "image = \"node:22\"\ncommand = [\"/bin/x\"]\n", "not an image ID"},
		{"x", "image = \"" + image + "\"\n", "command is missing"},
		{"x", "image = \"" + image + "\"\ncommand = [\"node\"]\n", "not an absolute path"},
		{"x", good + "secret = \"lower\"\n", "secret"},
		{"x", good + "url = \"https://example.com/mcp\"\n", "unknown key url"},
		{"x", good + "Image = \"x\"\n", "case differs"},
	} {
		if _, err := ParseServer(tt.name, "x.toml", []byte(tt.text)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseServer(%q, %q) = %v, want %q", tt.name, tt.text, err, tt.want)
		}
	}
}

func listing(t testing.TB, descr string) []mcppin.Tool {
	t.Helper()
	tools, err := mcppin.NewListing([]mcppin.Listed{
		{Name: "echo", Description: descr, InputSchema: []byte(`{"type":"object"}`)},
		{Name: "add", Description: "Adds two numbers.", InputSchema: []byte(`{"type":"object"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tools
}

func write(t *testing.T, dir, name, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o640); err != nil {
		t.Fatal(err)
	}
}

// TestLoadDir: a missing directory is no servers; a server without a pin,
// or with a pin of another image, is unpinned; a stray file, a broken pin
// or a pin without its declaration makes the whole directory invalid.
func TestLoadDir(t *testing.T) {
	own := ownership.Self()
	if c, err := LoadDir(filepath.Join(t.TempDir(), "none"), own); err != nil || !c.Valid() || len(c.Entries()) != 0 {
		t.Fatalf("LoadDir(missing) = %v, %v", c, err)
	}
	dir := t.TempDir()
	decl := "image = \"" + image + "\"\ncommand = [\"/usr/bin/node\", \"/srv/index.js\"]\n"
	write(t, dir, "everything.toml", decl)
	write(t, dir, "other.toml", strings.Replace(decl, "8f1c", "9f1c", 1))
	write(t, dir, "README.md", "notes")
	p, _ := mcppin.NewPin("everything", image, listing(t, "Echoes back the input."))
	b, _ := p.Encode()
	write(t, dir, "everything.pin.json", string(b))
	q, _ := mcppin.NewPin("other", image, nil)
	b2, _ := q.Encode()
	write(t, dir, "other.pin.json", string(b2))
	c, err := LoadDir(dir, own)
	if err != nil || !c.Valid() {
		t.Fatalf("LoadDir = %v", err)
	}
	if e, ok := c.Lookup("everything"); !ok || e.Pin == nil {
		t.Errorf("everything = %+v, want pinned", e)
	}
	if e, ok := c.Lookup("other"); !ok || e.Pin != nil || !strings.Contains(e.Why, "not the declared") {
		t.Errorf("other = %+v, want unpinned for its image", e)
	}
	found := c.Tools()
	if len(found) != 2 || found[0].Name != "mcp.everything.add" || found[1].Name != "mcp.everything.echo" {
		t.Errorf("Tools() = %+v", found)
	}
	for _, bad := range []struct{ name, text string }{
		{"everything.toml.bak", "x"},
		{"ghost.pin.json", string(b)},
		{"broken.toml", "image = 1"},
	} {
		d := t.TempDir()
		write(t, d, "everything.toml", decl)
		write(t, d, bad.name, bad.text)
		if c, err := LoadDir(d, own); err == nil || c.Valid() || !strings.Contains(err.Error(), "docs/runbook.md#mcp-invalid") {
			t.Errorf("LoadDir(with %s) = %v, want invalid", bad.name, err)
		}
	}
}
