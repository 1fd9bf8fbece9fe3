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
//     and at most one secret by name.
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
//	NAME.pin.json   the pin, written by `bxctl mcp pin NAME` (format: mcppin.Pin)
//
// and *.md files, which are documentation. Anything else is a problem.
package mcpserver

import (
	"fmt"
	"regexp"
	"slices"

	"wntrmute.dev/boxmaker/pkg/host/config"
	"wntrmute.dev/boxmaker/pkg/tool/mcppin"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// Server is one parsed declaration.
type Server struct {
	name    string
	image   string
	command []string
	secret  string
}

// Name is the server's name (its file name without .toml).
func (s Server) Name() string { return s.name }

// Image is the image the server runs in, by ID.
func (s Server) Image() string { return s.image }

// Command is the server's argv inside its image (a copy).
func (s Server) Command() []string { return slices.Clone(s.command) }

// Secret is the name of the one secret the server's container gets, or "".
func (s Server) Secret() string { return s.secret }

// Valid reports whether s was made by [ParseServer].
func (s Server) Valid() bool { return s.name != "" }

// Spec is a declaration as written.
type Spec struct {
	Image   string   `toml:"image"`
	Command []string `toml:"command"`
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
	if !mcppin.ImagePattern.MatchString(s.Image) {
		return Server{}, fmt.Errorf("image %q is not an image ID (sha256: and 64 lowercase hex digits); an image is named by ID so that it is never pulled or swapped", s.Image)
	}
	if err := mcppin.CheckCommand(s.Command); err != nil {
		return Server{}, err
	}
	if s.Secret != "" && !secretPattern.MatchString(s.Secret) {
		return Server{}, fmt.Errorf("secret %q must be 1 to 64 uppercase letters, digits or '_', starting with a letter (a name from brokerd's [secrets], not a value)", s.Secret)
	}
	return Server{name: name, image: s.Image, command: slices.Clone(s.Command), secret: s.Secret}, nil
}
