package arch

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
)

// Vocabulary lists the packages every role may link because they hold
// words, not machinery: they import the standard library only, so that
// linking one never brings a client, a store or a secret with it.
var Vocabulary = []string{"pkg/model/chat", "pkg/tool/toolset", "pkg/text/truncate"}

// StdlibOnly reports every non-test file of a [Vocabulary] package that
// imports anything outside the standard library (a path whose first
// element has a dot, or this module's own packages).
func StdlibOnly(root string) []string {
	mod, err := ModulePath(root)
	if err != nil {
		return []string{err.Error()}
	}
	vocab := func(r string) bool {
		return !strings.HasSuffix(r, "_test.go") && slices.Contains(Vocabulary, filepath.ToSlash(filepath.Dir(r)))
	}
	return parseEach(root, parser.ImportsOnly, vocab, func(r string, _ *token.FileSet, af *ast.File) (out []string) {
		for _, imp := range af.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			first, _, _ := strings.Cut(path, "/")
			if strings.Contains(first, ".") || path == mod || strings.HasPrefix(path, mod+"/") {
				out = append(out, fmt.Sprintf("%s: imports %s; a vocabulary package imports the standard library only", r, path))
			}
		}
		return out
	})
}
