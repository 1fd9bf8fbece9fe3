package arch

import (
	"fmt"
	"go/ast"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
)

// ToolStatusHome is the one tool status type: brokerd's answer, loopd's
// turn and the session log all hold a call's ending as this type
// (docs/decisions.md, "one tool status"). The session log spells it in
// its own words with a table of words, not with a second type.
const ToolStatusHome = "pkg/socket/wire.ToolStatus"

// statusMeaning is the tool-call ending a constant's name or value
// stands for, in either spelling (broker.sock's or the session log's),
// or "" for none. Prefixes such as Status are ignored.
func statusMeaning(s string) string {
	w := strings.ToLower(strings.TrimPrefix(strings.TrimPrefix(s, "Status"), "status_"))
	w = strings.ReplaceAll(w, "_", "")
	switch w {
	case "ran", "ok":
		return "ran"
	case "failed", "error":
		return "failed"
	case "denied":
		return "denied"
	}
	return ""
}

// ToolStatuses reports every second tool status type and every
// conversion between tool statuses:
//
//   - a named type, other than [ToolStatusHome], whose typed constants
//     stand for two or more of ran/ok, failed/error and denied (by name
//     or by string value), as loopd's broker.Status and the session log's
//     ResultStatus once did;
//   - a switch case that matches a tool status constant and assigns or
//     returns another, the conversion that kept them in step;
//   - a map from a status type to a status type.
//
// The check reads syntax only: a conversion written as an if chain is a
// reviewer's to catch.
func ToolStatuses(root string) []string {
	return parseEach(root, 0, nil, func(r string, fset *token.FileSet, af *ast.File) []string {
		var out []string
		pkg := filepath.ToSlash(filepath.Dir(r))
		for typ, meanings := range typedConstants(af) {
			if pkg+"."+typ == ToolStatusHome || len(meanings) < 2 {
				continue
			}
			out = append(out, fmt.Sprintf("%s: type %s is a second tool status (its constants mean %s); use %s; see docs/decisions.md",
				r, typ, strings.Join(sorted(meanings), ", "), ToolStatusHome))
		}
		ast.Inspect(af, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CaseClause:
				if converts(n) {
					out = append(out, fmt.Sprintf("%s:%d: a case that turns one tool status into another; there is one status (%s), carry it as it is",
						r, fset.Position(n.Pos()).Line, ToolStatusHome))
				}
			case *ast.MapType:
				if statusType(n.Key) && statusType(n.Value) {
					out = append(out, fmt.Sprintf("%s:%d: a map from tool status to tool status; there is one status (%s)",
						r, fset.Position(n.Pos()).Line, ToolStatusHome))
				}
			}
			return true
		})
		return out
	})
}

// typedConstants maps each type named in a const declaration of af to
// the tool-call endings its constants stand for. A spec without a type
// or value takes the previous spec's type (iota groups).
func typedConstants(af *ast.File) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, d := range af.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		typ := ""
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			switch {
			case vs.Type != nil:
				id, ok := vs.Type.(*ast.Ident)
				typ = ""
				if ok {
					typ = id.Name
				}
			case len(vs.Values) > 0:
				typ = ""
			}
			if typ == "" {
				continue
			}
			for i, name := range vs.Names {
				m := statusMeaning(name.Name)
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if v, err := strconv.Unquote(lit.Value); err == nil && statusMeaning(v) != "" {
							m = statusMeaning(v)
						}
					}
				}
				if m == "" {
					continue
				}
				if out[typ] == nil {
					out[typ] = map[string]bool{}
				}
				out[typ][m] = true
			}
		}
	}
	return out
}

// statusConst reports whether e names a tool status constant (StatusRan,
// wire.StatusDenied, Ran, sessionlog.StatusOK).
func statusConst(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return statusMeaning(e.Name) != "" && e.Name != "ok" && e.Name != "err"
	case *ast.SelectorExpr:
		return statusMeaning(e.Sel.Name) != ""
	}
	return false
}

// statusType reports whether e names a status type (ToolStatus,
// wire.ToolStatus, ResultStatus, Status).
func statusType(e ast.Expr) bool {
	name := ""
	switch e := e.(type) {
	case *ast.Ident:
		name = e.Name
	case *ast.SelectorExpr:
		name = e.Sel.Name
	}
	return strings.HasSuffix(name, "Status")
}

// converts reports whether a case that matches a status constant assigns
// a status constant to something named Status, or returns one.
func converts(cc *ast.CaseClause) bool {
	matches := false
	for _, e := range cc.List {
		matches = matches || statusConst(e)
	}
	if !matches {
		return false
	}
	found := false
	for _, st := range cc.Body {
		ast.Inspect(st, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				for i, l := range n.Lhs {
					if i < len(n.Rhs) && named(l, "status") && statusConst(n.Rhs[i]) {
						found = true
					}
				}
			case *ast.ReturnStmt:
				for _, r := range n.Results {
					found = found || statusConst(r)
				}
			case *ast.FuncLit:
				return false
			}
			return true
		})
	}
	return found
}

// named reports whether e is an identifier or field called name (any case).
func named(e ast.Expr, name string) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return strings.EqualFold(e.Name, name)
	case *ast.SelectorExpr:
		return strings.EqualFold(e.Sel.Name, name)
	}
	return false
}

func sorted(set map[string]bool) []string {
	var out []string
	for _, k := range []string{"ran", "failed", "denied"} {
		if set[k] {
			out = append(out, k)
		}
	}
	return out
}
