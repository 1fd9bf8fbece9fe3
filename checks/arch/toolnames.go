package arch

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
)

// ToolHome is the one package that may list tool names (package toolset).
const ToolHome = "pkg/tool/toolset"

// ToolLists reports every top-level declaration outside [ToolHome] and
// outside tests that spells two or more of names as string literals: a
// list of tools (a const block, a slice, a switch, a predicate) kept apart
// from the one list, which is how loopd's IsMemory came to disagree with
// brokerd's. One name alone is allowed (a word such as "memory" also names
// a directory); tests may spell names, since they check the list.
func ToolLists(root string, names []string) []string {
	product := func(r string) bool { return !strings.HasSuffix(r, "_test.go") && !strings.HasPrefix(r, ToolHome+"/") }
	return parseEach(root, parser.SkipObjectResolution, product, func(r string, fset *token.FileSet, af *ast.File) (out []string) {
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
		return out
	})
}
