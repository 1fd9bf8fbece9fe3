// Package mcpserver reads the owner's MCP server declarations and their
// pin files (the pin's format and the call envelope are package mcppin's,
// which the toolkit shares).
//
// # Invariants
//
//   - A [Server] is made only by [ParseServer] and holds no invalid state:
//     a name under toolset.ServerPattern, an image by ID ("sha256:" and 64
//     hex digits: never a name, which Podman could resolve or pull), a
//     command of at most 64 arguments with no NUL and an absolute program,
//     and at most one secret by name; or, for a remote (Streamable HTTP)
//     server, an https URL on a host name (mcppin.ParseRemoteURL) and no
//     image or command (its toolkit runs in brokerd's tool image), and at
//     most one secret by name, sent to that URL alone as a bearer token.
//   - Loading fails closed: [LoadDir] returns an invalid [Catalog] on any
//     problem in the directory, and brokerd refuses every MCP call while
//     it is invalid; a server without a pin file is declared but
//     unpinned, and every call to it is refused (mcp_unpinned).
//
// # Files
//
// The owner's mcp directory sits beside the grant directory (its parent's
// "mcp"; package layout's MCP entry under a state directory), under the
// same ownership rule as grants: written only by root or the owner. It
// holds, for each server NAME:
//
//	NAME.toml       the declaration, written by the owner:
//	                  image = "sha256:<64 hex>"   # loaded into brokerd's Podman; never pulled
//	                  command = ["/usr/bin/node", "/opt/mcp/server.js"]
//	                  # secret = "NAME"           # from brokerd's [secrets]; the server gets it as a file
//	                or, for a remote (Streamable HTTP) server:
//	                  url = "https://mcp.example.com/mcp"  # https; its host must be in the grant's hosts
//	                  # secret = "NAME"           # sent as "Authorization: Bearer …" to that URL only
//	NAME.pin.json   the pin, written by `bxctl mcp pin NAME` (format: mcppin.Pin)
//
// and *.md files, which are documentation. Anything else is a problem.
package mcpserver

import (
	"errors"
	"fmt"
	"regexp"
	"slices"

	"wntrmute.dev/boxmaker/pkg/host/config"
	"wntrmute.dev/boxmaker/pkg/tool/hostrule"
	"wntrmute.dev/boxmaker/pkg/tool/mcppin"
	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// Server is one parsed declaration.
type Server struct {
	name    string
	image   string
	command []string
	url     toolargs.URL // remote servers only
	secret  string
}

// Remote reports whether s is a remote (Streamable HTTP) server, reached
// at [Server.URL] from a toolkit container in brokerd's tool image.
func (s Server) Remote() bool { return !s.url.IsZero() }

// URL is a remote server's https URL, or "".
func (s Server) URL() string { return s.url.String() }

// Host is a remote server's host, the one host its calls may reach; the
// zero Name for a server run from its image.
func (s Server) Host() hostrule.Name { return s.url.Host() }

// NewPin makes the pin of s's listing tools: bound to its image, or to a
// remote server's URL.
func (s Server) NewPin(tools []mcppin.Tool) (mcppin.Pin, error) {
	if s.Remote() {
		return mcppin.NewRemotePin(s.name, s.url.String(), tools)
	}
	return mcppin.NewPin(s.name, s.image, tools)
}

// Source is what s's pin is bound to, for the owner to read: its image
// or its URL.
func (s Server) Source() string {
	if s.Remote() {
		return "url " + s.url.String()
	}
	return "image " + s.image
}

// Name is the server's name (its file name without .toml).
func (s Server) Name() string { return s.name }

// Image is the image the server runs in, by ID; "" for a remote server.
func (s Server) Image() string { return s.image }

// Command is the server's argv inside its image (a copy); nil for a
// remote server.
func (s Server) Command() []string { return slices.Clone(s.command) }

// Secret is the name of the one secret the server's container gets, or "".
func (s Server) Secret() string { return s.secret }

// Valid reports whether s was made by [ParseServer].
func (s Server) Valid() bool { return s.name != "" }

// Spec is a declaration as written.
type Spec struct {
	Image   string   `toml:"image"`
	Command []string `toml:"command"`
	URL     string   `toml:"url"`
	Secret  string   `toml:"secret"`
}

var secretPattern = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)

// ParseServer parses the declaration of server name from its TOML text;
// file labels errors.
func ParseServer(name, file string, data []byte) (Server, error) {
	if !toolset.ServerPattern.MatchString(name) {
		return Server{}, fmt.Errorf("server name %q must be 1 to 32 lowercase letters, digits or '-', starting with a letter (it is part of every tool's name)", name)
	}
	var s Spec
	if err := config.Decode(data, file, &s); err != nil {
		return Server{}, err
	}
	return NewServer(name, s)
}

// NewServer checks a declaration's values.
func NewServer(name string, s Spec) (Server, error) {
	if !toolset.ServerPattern.MatchString(name) {
		return Server{}, fmt.Errorf("server name %q must be 1 to 32 lowercase letters, digits or '-', starting with a letter", name)
	}
	if s.Secret != "" && !secretPattern.MatchString(s.Secret) {
		return Server{}, fmt.Errorf("secret %q must be 1 to 64 uppercase letters, digits or '_', starting with a letter (a name from brokerd's [secrets], not a value)", s.Secret)
	}
	if s.URL != "" {
		if s.Image != "" || s.Command != nil {
			return Server{}, errors.New("a remote server (url) takes no image or command: its calls run in brokerd's own tool image, which speaks to the url; declare either url, or image and command")
		}
		u, err := mcppin.ParseRemoteURL(s.URL)
		if err != nil {
			return Server{}, err
		}
		return Server{name: name, url: u, secret: s.Secret}, nil
	}
	if !mcppin.ImagePattern.MatchString(s.Image) {
		return Server{}, fmt.Errorf("image %q is not an image ID (sha256: and 64 lowercase hex digits); an image is named by ID so that it is never pulled or swapped", s.Image)
	}
	if err := mcppin.CheckCommand(s.Command); err != nil {
		return Server{}, err
	}
	return Server{name: name, image: s.Image, command: slices.Clone(s.Command), secret: s.Secret}, nil
}
