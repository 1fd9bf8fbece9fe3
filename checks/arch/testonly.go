package arch

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
)

// TestOnlyPrefix starts the name of every function that loosens a
// product's rules for a test (runner.TestOnlyNetwork lets a test reach a
// private listener). Such a function may be declared in a file named
// testonly.go and called only from _test.go files: a product file that
// calls one would carry a test's authority into a release.
const TestOnlyPrefix = "TestOnly"

// TestOnly lists every use of a TestOnly name (a call, a function value,
// a declaration) in a .go file under root that is neither a test nor a
// testonly.go, with its line.
func TestOnly(root string) []string {
	files, err := goFiles(root)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || filepath.Base(f) == "testonly.go" {
			continue
		}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", rel(root, f), err))
			continue
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && strings.HasPrefix(id.Name, TestOnlyPrefix) {
				out = append(out, fmt.Sprintf("%s:%d: a product file names %s, which only a test may use (declare it in a testonly.go)",
					rel(root, f), fset.Position(id.Pos()).Line, id.Name))
			}
			return true
		})
	}
	return out
}
