// Package arch holds the architecture checks of `make gate`: rules
// about the shape of the source tree that the compiler does not enforce.
//
// Each check is a function from a tree's root to a list of problems (one
// line each, naming the file), so the tests can run it on this repository
// and also on a planted tree in which it must find the defect: a check
// that cannot fail is no check. The rules:
//
//   - no .go file is over [MaxLines] lines;
//   - nothing under pkg/ imports cmd/, and no cmd/<role> imports another
//     role's packages;
//   - only [BindingsHome] imports Podman's modules (github.com/containers/)
//     outside tests;
//   - every package has a doc comment ("Package x ..." outside main);
//   - every runbook pointer in the source names an entry that exists in
//     docs/runbook.md, every entry has its five parts and is pointed at,
//     and at least one pointer exists;
//   - each binary's full dependency list matches cmd/<role>/deps.txt, and
//     no binary links a package its role must never hold;
//   - every module required in go.mod has a row in docs/dependencies.md;
//   - no product package (outside checks/, outside tests) imports checks/;
//   - tool names are listed once, in [ToolHome]: no other declaration
//     spells two of them ([ToolLists]);
//   - the [Vocabulary] packages import the standard library only
//     ([StdlibOnly]);
//   - no string literal outside [WireHome] names one of our sockets, and
//     no package but [ConvHome] reads or writes frames (wire.go; the VM
//     test channel, [VMChannel], aside);
//   - one tool status type, [ToolStatusHome], and no conversion between
//     two ([ToolStatuses]);
//   - the top level holds only [TopLevel]'s entries;
//   - a TestOnly name is declared in a testonly.go and used only by tests
//     ([TestOnly]);
//   - a role's config is decoded by one type, its own in [ConfigHome]: no
//     other struct with TOML keys, strict load or TOML parse outside the
//     listed schemas and readers ([ConfigSchemas]);
//   - no state path is spelled outside [LayoutHome] (a join naming one of
//     the table's directories or a file beside an entry, a session's
//     epoch file by its format), and no config key names what the table
//     decides but the ones [LayoutKeys] lists with their reasons
//     ([StatePaths]);
//   - the README is at most [ReadmeMaxLines] lines, and every relative
//     link in it and in docs/*.md resolves, anchor included ([Links]).
package arch

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// MaxLines is the longest a .go file may be.
const MaxLines = 500

// goFiles lists the .go files under root, skipping hidden directories and
// testdata (fixtures are not code of ours).
func goFiles(root string) ([]string, error) { return sourceFiles(root, ".go") }

// sourceFiles lists the files under root whose names end in ext, leaving
// out hidden and testdata directories and the top's vendor/.
func sourceFiles(root, ext string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// vendor/ at the top is third parties' code: buildGoModule puts
		// it there in the Nix sandbox (checks.gate), and it is no code of
		// ours to hold to our rules.
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || p == filepath.Join(root, "vendor")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ext) {
			files = append(files, p)
		}
		return nil
	})
	return files, err
}

func rel(root, p string) string {
	r, err := filepath.Rel(root, p)
	if err != nil {
		return p
	}
	return r
}

// Lengths reports every .go file over MaxLines lines.
func Lengths(root string) []string {
	files, err := goFiles(root)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, f := range files {
		n, err := countLines(f)
		if err != nil {
			out = append(out, err.Error())
			continue
		}
		if n > MaxLines {
			out = append(out, fmt.Sprintf("%s: %d lines, over the limit of %d", rel(root, f), n, MaxLines))
		}
	}
	return out
}

func countLines(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		n++
	}
	return n, sc.Err()
}

// ModulePath reads the module path from root/go.mod.
func ModulePath(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	return "", fmt.Errorf("go.mod: no module line")
}

// Imports reports pkg/ packages that import cmd/, and cmd/<role> packages
// that import another role's packages. Test files count: a test that
// reaches into another role couples them just the same.
// BindingsHome is the one package that may import Podman's bindings
// (brokerd's runner); a test elsewhere may, to measure against it.
const BindingsHome = "cmd/brokerd/internal/runner"

func Imports(root string) []string {
	mod, err := ModulePath(root)
	if err != nil {
		return []string{err.Error()}
	}
	return parseEach(root, parser.ImportsOnly, nil, func(r string, _ *token.FileSet, af *ast.File) (out []string) {
		for _, imp := range af.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			if strings.HasPrefix(path, "github.com/containers/") && !strings.HasSuffix(r, "_test.go") && !strings.HasPrefix(r, BindingsHome+"/") {
				out = append(out, fmt.Sprintf("%s: imports %s; only %s drives Podman", r, path, BindingsHome))
			}
			sub, ok := strings.CutPrefix(path, mod+"/")
			if !ok {
				continue
			}
			// checks/ is not an internal folder, so the compiler would let
			// the product link a test double: this rule stands in for it.
			if strings.HasPrefix(sub, "checks/") && !strings.HasSuffix(r, "_test.go") && !strings.HasPrefix(r, "checks/") {
				out = append(out, fmt.Sprintf("%s: imports %s; no product package may import checks/", r, path))
			}
			if !strings.HasPrefix(sub, "cmd/") {
				continue
			}
			target := strings.SplitN(sub, "/", 3)[1]
			switch {
			case strings.HasPrefix(r, "pkg/"):
				out = append(out, fmt.Sprintf("%s: pkg/ imports %s; the shared core must not depend on a role", r, path))
			case strings.HasPrefix(r, "cmd/"):
				if role := strings.SplitN(r, "/", 3)[1]; role != target {
					out = append(out, fmt.Sprintf("%s: role %s imports role %s (%s); roles share code only through pkg/", r, role, target, path))
				}
			}
		}
		return out
	})
}

// Docs reports every package directory with no package doc comment. A
// non-main package's comment must start "Package <name>".
func Docs(root string) []string {
	files, err := goFiles(root)
	if err != nil {
		return []string{err.Error()}
	}
	byDir := map[string][]string{}
	for _, f := range files {
		byDir[filepath.Dir(f)] = append(byDir[filepath.Dir(f)], f)
	}
	var out []string
	fset := token.NewFileSet()
	for dir, all := range byDir {
		// Doc comments on test files do not document a package that
		// has other files; a test-only package is documented by them.
		var fs []string
		for _, f := range all {
			if !strings.HasSuffix(f, "_test.go") {
				fs = append(fs, f)
			}
		}
		if len(fs) == 0 {
			fs = all
		}
		documented, name := false, ""
		for _, f := range fs {
			af, err := parser.ParseFile(fset, f, nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				out = append(out, err.Error())
				continue
			}
			name = strings.TrimSuffix(af.Name.Name, "_test")
			if af.Doc == nil {
				continue
			}
			if name == "main" || strings.HasPrefix(af.Doc.Text(), "Package "+name+" ") {
				documented = true
			}
		}
		if !documented {
			out = append(out, fmt.Sprintf("%s: package %s has no doc comment stating its invariant", rel(root, dir), name))
		}
	}
	slices.Sort(out)
	return out
}

var (
	pointerRE = regexp.MustCompile(`see docs/runbook\.md#([A-Za-z0-9_-]+)`)
	entryRE   = regexp.MustCompile(`(?m)^## ([a-z0-9-]+)\s*$`)
)

// RunbookParts are the five parts every runbook entry has.
var RunbookParts = []string{"**What you see**", "**Why**", "**How to confirm**", "**How to fix**", "**How to check**"}

// Runbook checks the runbook pointers in the .go files against
// docs/runbook.md.
func Runbook(root string) []string {
	b, err := os.ReadFile(filepath.Join(root, "docs", "runbook.md"))
	if err != nil {
		return []string{err.Error()}
	}
	doc := string(b)
	entries := map[string]string{}
	locs := entryRE.FindAllStringSubmatchIndex(doc, -1)
	for i, m := range locs {
		end := len(doc)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		entries[doc[m[2]:m[3]]] = doc[m[1]:end]
	}
	files, err := goFiles(root)
	if err != nil {
		return []string{err.Error()}
	}
	// The NixOS module's assertions point at entries too.
	nixFiles, err := sourceFiles(root, ".nix")
	if err != nil {
		return []string{err.Error()}
	}
	files = append(files, nixFiles...)
	var out []string
	pointed := map[string]bool{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return []string{err.Error()}
		}
		for i, line := range strings.Split(string(src), "\n") {
			for _, m := range pointerRE.FindAllStringSubmatch(line, -1) {
				pointed[m[1]] = true
				if _, ok := entries[m[1]]; !ok {
					out = append(out, fmt.Sprintf("%s:%d: points at docs/runbook.md#%s, which has no entry", rel(root, f), i+1, m[1]))
				}
			}
		}
	}
	if len(pointed) == 0 {
		out = append(out, "no runbook pointer found in any .go file: the check would pass vacuously")
	}
	for name, body := range entries {
		for _, part := range RunbookParts {
			if !strings.Contains(body, part) {
				out = append(out, fmt.Sprintf("docs/runbook.md#%s: entry lacks %s", name, part))
			}
		}
		if !pointed[name] && !strings.Contains(body, "(not a refusal)") {
			out = append(out, fmt.Sprintf("docs/runbook.md#%s: no source points at this entry", name))
		}
	}
	slices.Sort(out)
	return out
}
