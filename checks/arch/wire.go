package arch

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// WireHome is the one package that writes a socket's file name.
const WireHome = "pkg/socket/wire"

// ConvHome is the one package that reads and writes frames (the one
// client call and the one server loop), besides [FrameHome] itself.
const (
	ConvHome  = "pkg/socket/rpc"
	FrameHome = "pkg/socket/frame"
	// VMChannel is the VM test host's serial line to its guest agent: no
	// socket between roles, so not a conversation pkg/socket/rpc carries, but
	// framed by pkg/socket/frame all the same (one length-prefix rule, capped).
	VMChannel = "checks/vm"
)

// socketNameRE matches a string literal that is one of our sockets' file
// names, alone or as the last element of a path.
var socketNameRE = func() *regexp.Regexp {
	var names []string
	for _, s := range wire.Sockets {
		names = append(names, regexp.QuoteMeta(s.Name))
	}
	return regexp.MustCompile(`(^|/)(` + strings.Join(names, "|") + `)$`)
}()

// SocketNames reports every string literal naming one of our sockets
// (its file name, or a path ending in it) outside [WireHome], tests
// included: a socket's name is written once, and everything else takes
// it from its wire.Socket value.
func SocketNames(root string) []string {
	return parseEach(root, parser.SkipObjectResolution, nil, func(r string, fset *token.FileSet, af *ast.File) (out []string) {
		if strings.HasPrefix(r, WireHome+"/") {
			return nil
		}
		ast.Inspect(af, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if v, err := strconv.Unquote(lit.Value); err == nil && socketNameRE.MatchString(v) {
				out = append(out, fmt.Sprintf("%s:%d: writes the socket name %s; take it from its wire.Socket (%s)", r, fset.Position(lit.Pos()).Line, lit.Value, WireHome))
			}
			return true
		})
		return out
	})
}

// Frames reports every package outside [ConvHome] and [FrameHome] that
// imports package frame, outside tests (which plant broken frames on
// purpose): every conversation goes through the one client call and the
// one server loop, so that every frame is capped, strictly decoded and
// refused in one way.
func Frames(root string) []string {
	mod, err := ModulePath(root)
	if err != nil {
		return []string{err.Error()}
	}
	return parseEach(root, parser.ImportsOnly, nil, func(r string, _ *token.FileSet, af *ast.File) (out []string) {
		if strings.HasSuffix(r, "_test.go") || strings.HasPrefix(r, ConvHome+"/") || strings.HasPrefix(r, FrameHome+"/") || strings.HasPrefix(r, VMChannel+"/") {
			return nil
		}
		for _, imp := range af.Imports {
			if strings.Trim(imp.Path.Value, `"`) == mod+"/"+FrameHome {
				out = append(out, fmt.Sprintf("%s: imports %s; only %s reads and writes frames (the one client call and server loop)", r, FrameHome, ConvHome))
			}
		}
		return out
	})
}

// parseEach parses every .go file under root that keep accepts (nil:
// every file) with mode, and collects what check reports for it (r is the
// file's slash path from root). Every rule that reads source goes
// through it, so each walks and parses the tree the same way.
func parseEach(root string, mode parser.Mode, keep func(r string) bool, check func(r string, fset *token.FileSet, af *ast.File) []string) []string {
	files, err := goFiles(root)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	fset := token.NewFileSet()
	for _, f := range files {
		r := filepath.ToSlash(rel(root, f))
		if keep != nil && !keep(r) {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, mode)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", r, err))
			continue
		}
		out = append(out, check(r, fset, af)...)
	}
	return out
}
