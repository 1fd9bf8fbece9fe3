package arch

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// TopLevel is every entry the repository's top level may hold: the design
// card's (flake.nix flake.lock go.mod go.sum cmd pkg nix images modules
// deploy docs checks README.md) plus the entry points the README names
// (Makefile, .ci) and git's own files.
var TopLevel = []string{
	"flake.nix", "flake.lock", "go.mod", "go.sum", "cmd", "pkg", "nix", "images",
	"modules", "deploy", "docs", "checks", "README.md", "Makefile", ".ci",
	".git", ".gitignore",
}

// Required are the entries the top level must hold: the design card's,
// Makefile and .ci (git's own files may be absent in a copy of the tree).
var Required = TopLevel[:len(TopLevel)-2]

// Top lists every entry at root's top level that is not in [TopLevel],
// leaving out what root's .gitignore names with a leading slash (build
// output such as /bin/), which is no part of the tree, and every entry of
// [Required] that is missing: the top level holds exactly the card's
// entries plus Makefile and .ci.
func Top(root string) []string {
	entries, err := os.ReadDir(root)
	if err != nil {
		return []string{err.Error()}
	}
	ignored := map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(root, ".gitignore")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if name, ok := strings.CutPrefix(strings.TrimSpace(line), "/"); ok {
				ignored[strings.TrimSuffix(name, "/")] = true
			}
		}
	}
	var out []string
	for _, e := range entries {
		if !slices.Contains(TopLevel, e.Name()) && !ignored[e.Name()] {
			out = append(out, fmt.Sprintf("%s: not one of the top level's entries (%s)", e.Name(), strings.Join(TopLevel, " ")))
		}
	}
	for _, name := range Required {
		if !slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.Name() == name }) {
			out = append(out, fmt.Sprintf("%s: missing from the top level (the design card's entries, Makefile and .ci are all required)", name))
		}
	}
	return out
}
