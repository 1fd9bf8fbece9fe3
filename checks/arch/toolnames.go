package arch

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ToolHome is the one package that may list tool names (package toolset).
const ToolHome = "pkg/toolset"

// ToolLists reports every top-level declaration outside [ToolHome] and
// outside tests that spells two or more of names as string literals: a
// list of tools (a const block, a slice, a switch, a predicate) kept apart
// from the one list, which is how loopd's IsMemory came to disagree with
// brokerd's. One name alone is allowed (a word such as "memory" also names
// a directory); tests may spell names, since they check the list.
func ToolLists(root string, names []string) []string {
	files, err := goFiles(root)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	fset := token.NewFileSet()
	for _, f := range files {
		r := filepath.ToSlash(rel(root, f))
		if strings.HasSuffix(r, "_test.go") || strings.HasPrefix(r, ToolHome+"/") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", r, err))
			continue
		}
		for _, d := range af.Decls {
			var found []string
			ast.Inspect(d, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				if s, err := strconv.Unquote(lit.Value); err == nil && slices.Contains(names, s) && !slices.Contains(found, s) {
					found = append(found, s)
				}
				return true
			})
			if len(found) >= 2 {
				out = append(out, fmt.Sprintf("%s:%d: spells the tool names %q; tools are listed once, in %s (use its constants)",
					r, fset.Position(d.Pos()).Line, found, ToolHome))
			}
		}
	}
	return out
}
