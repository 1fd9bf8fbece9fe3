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
		{"x", good + "url = \"https://example.com/mcp\"\n", "takes no image or command"},
		{"x", good + "Image = \"x\"\n", "case differs"},
	} {
		if _, err := ParseServer(tt.name, "x.toml", []byte(tt.text)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseServer(%q, %q) = %v, want %q", tt.name, tt.text, err, tt.want)
		}
	}
}

// TestParseRemoteServer: a remote (Streamable HTTP) server is a url on
// https and a host name, with at most a secret; anything else is refused
// with the rule it breaks.
func TestParseRemoteServer(t *testing.T) {
	s, err := ParseServer("search", "search.toml", []byte("url = \"https://mcp.example.com/v1/mcp\"\nsecret = \"SEARCH_TOKEN\"\n"))
	if err != nil || !s.Remote() || s.URL() != "https://mcp.example.com/v1/mcp" || s.Host().String() != "mcp.example.com" ||
		s.Image() != "" || s.Command() != nil || s.Secret() != "SEARCH_TOKEN" || s.Source() != "url https://mcp.example.com/v1/mcp" {
		t.Fatalf("ParseServer(remote) = %+v, %v", s, err)
	}
	if p, err := s.NewPin(nil); err != nil || p.URL != s.URL() || p.Image != "" {
		t.Errorf("NewPin(remote) = %+v, %v; want bound to the url", p, err)
	}
	for _, tt := range []struct{ name, text, want string }{
		{"plain-http", "url = \"http://mcp.example.com/mcp\"\n", "must be https://"},
		{"no-scheme", "url = \"mcp.example.com/mcp\"\n", "must be https://"},
		{"ipv4", "url = \"https://127.0.0.1/mcp\"\n", "127.0.0.1"},
		{"ipv6", "url = \"https://[::1]/mcp\"\n", "IP address"},
		{"port", "url = \"https://mcp.example.com:8443/mcp\"\n", "port is not allowed"},
		{"userinfo", "url = \"https://user:pw@mcp.example.com/mcp\"\n", "user information"},
		{"upper-case-host", "url = \"https://MCP.Example.com/mcp\"\n", "write the host in lower case, \"mcp.example.com\""},
		{"query", "url = \"https://mcp.example.com/mcp?api_key=K\"\n", "no query or fragment"},
		{"empty-query", "url = \"https://mcp.example.com/mcp?\"\n", "no query or fragment"},
		{"fragment", "url = \"https://mcp.example.com/mcp#k\"\n", "no query or fragment"},
		{"single-label", "url = \"https://localhost/mcp\"\n", "localhost"},
		{"not-canonical", "url = \"https://mcp.example.com/a b\"\n", "percent-encoded"},
		{"with-image", "url = \"https://mcp.example.com/mcp\"\nimage = \"" + image + "\"\n", "takes no image or command"},
		{"with-command", "url = \"https://mcp.example.com/mcp\"\ncommand = [\"/bin/x\"]\n", "takes no image or command"},
		{"bad-secret", "url = \"https://mcp.example.com/mcp\"\nsecret = \"token\"\n", "secret"},
		{"not-a-string", "url = 1\n", "url"},
		{"neither", "secret = \"TOKEN\"\n", "not an image ID"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if s, err := ParseServer("x", "x.toml", []byte(tt.text)); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseServer(%q) = %+v, %v; want an error with %q", tt.text, s, err, tt.want)
			}
		})
	}
}

// TestLoadDirRemote: a remote server's pin is bound to its URL; a pin of
// another URL, or one taken from an image, leaves it unpinned.
func TestLoadDirRemote(t *testing.T) {
	own := ownership.Self()
	for _, tt := range []struct {
		name, pinURL, pinImage, want string
	}{
		{"same url", "https://mcp.example.com/mcp", "", ""},
		{"other url", "https://mcp.example.com/other", "", "taken from url https://mcp.example.com/other, not the declared url https://mcp.example.com/mcp"},
		{"an image", "", image, "taken from image " + image},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, "search.toml", "url = \"https://mcp.example.com/mcp\"\n")
			var p mcppin.Pin
			var err error
			if tt.pinURL != "" {
				p, err = mcppin.NewRemotePin("search", tt.pinURL, listing(t, "Echoes."))
			} else {
				p, err = mcppin.NewPin("search", tt.pinImage, listing(t, "Echoes."))
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := p.Encode()
			write(t, dir, "search.pin.json", string(b))
			c, err := LoadDir(dir, own)
			if err != nil {
				t.Fatal(err)
			}
			e, _ := c.Lookup("search")
			if tt.want == "" && (e.Pin == nil || e.Pin.URL != tt.pinURL) {
				t.Errorf("entry = %+v; want pinned", e)
			}
			if tt.want != "" && (e.Pin != nil || !strings.Contains(e.Why, tt.want)) {
				t.Errorf("entry = %+v; want unpinned: %s", e, tt.want)
			}
		})
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
