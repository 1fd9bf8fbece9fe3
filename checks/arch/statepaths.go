package arch

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// LayoutHome is the one table of the state directory (package layout):
// every path under it, every socket directory and whose uids its
// listener accepts.
const LayoutHome = "pkg/host/layout"

// epochSpelling is a session's epoch file spelled by hand.
var epochSpelling = regexp.MustCompile(`%d\.(jsonl|baseline\.json)`)

// LayoutKey matches a config key that names what the layout table
// decides: a state or grants directory, a socket or its directory, a
// list of peer uids or gids.
var LayoutKey = regexp.MustCompile(`^(state_dir|grants_dir|([a-z]+_)*socket(_dir)?|([a-z]+_)*(allow_uids|allow_gids|listener_uids))$`)

// LayoutKeys are the config keys of that kind the roles still read,
// each with why the layout table cannot decide it. Any other is refused:
// a role derives its paths and peers from its state directory and the
// table ([LayoutHome]; the loader's config.Placed, issue 25 item 1).
var LayoutKeys = map[string]string{}

func init() {
	// The peer uid lists and every path under the state directory left
	// the configs (pkg/host/daemon gives each listener the table's uids;
	// each role's loader fills its paths from the state directory and
	// refuses an old key naming another path than the table's).
	const gids = "an extra lock the owner may add (the peer's group must also be listed); the table names no groups of peers, so nothing else could supply it"
	LayoutKeys["inferproxy.allow_gids"] = gids
	LayoutKeys["loopd.allow_gids"] = gids
	LayoutKeys["brokerd.podman_socket"] = "[runner]'s Podman service: bxctl up's own (run/podman, the table's) or the owner's rootless podman.socket, which no table of ours holds"
}

// StatePaths lists, in cmd/ and pkg/ outside [LayoutHome] and tests,
// every state path spelled by hand: a path join with a string naming one
// of the table's top-level entries (tops) or with a name added to an
// entry's path (layout.X.In(state) joined with "file"), and a session's
// epoch file spelled with its format; and, in [ConfigHome], every config
// key [LayoutKey] matches that [LayoutKeys] does not list.
func StatePaths(root string, tops []string) []string {
	files, err := goFiles(root)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, f := range files {
		r := filepath.ToSlash(rel(root, f))
		if strings.HasSuffix(r, "_test.go") || !(strings.HasPrefix(r, "cmd/") || strings.HasPrefix(r, "pkg/")) || strings.HasPrefix(r, LayoutHome+"/") {
			continue
		}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", r, err))
			continue
		}
		role := ""
		if rest, ok := strings.CutPrefix(r, ConfigHome+"/"); ok {
			role, _, _ = strings.Cut(rest, "/")
		}
		ast.Inspect(file, func(n ast.Node) bool {
			line := func() int { return fset.Position(n.Pos()).Line }
			switch n := n.(type) {
			case *ast.BasicLit:
				if s, err := strconv.Unquote(n.Value); err == nil && n.Kind == token.STRING && epochSpelling.MatchString(s) {
					out = append(out, fmt.Sprintf("%s:%d: spells a session's epoch file (%q): use layout.EpochLog, EpochBaseline or EpochRel", r, line(), s))
				}
			case *ast.CallExpr:
				if !isJoin(n.Fun) {
					return true
				}
				onEntry := len(n.Args) > 0 && isEntryIn(n.Args[0])
				for i, a := range n.Args {
					lit, ok := a.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING || i == 0 {
						continue
					}
					s, _ := strconv.Unquote(lit.Value)
					first, _, _ := strings.Cut(s, "/")
					if slices.Contains(tops, first) || onEntry {
						out = append(out, fmt.Sprintf("%s:%d: spells the state path %q: name it in package layout (an entry of the table, or a function beside it)", r, line(), s))
					}
				}
			case *ast.StructType:
				if role == "" {
					return true
				}
				for _, key := range tomlKeys(n) {
					if LayoutKey.MatchString(key) {
						if _, ok := LayoutKeys[role+"."+key]; !ok {
							out = append(out, fmt.Sprintf("%s:%d: config key %s.%s names what the layout table decides (a path under the state directory, a socket or its peers): derive it from the state directory and package layout", r, line(), role, key))
						}
					}
				}
			}
			return true
		})
	}
	return out
}

// isJoin is filepath.Join or path.Join.
func isJoin(fun ast.Expr) bool {
	sel, ok := fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Join" {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && (x.Name == "filepath" || x.Name == "path")
}

// isEntryIn is layout.X.In(...): an entry's path in a state directory.
func isEntryIn(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "In" {
		return false
	}
	inner, ok := sel.X.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := inner.X.(*ast.Ident)
	return ok && pkg.Name == "layout"
}
