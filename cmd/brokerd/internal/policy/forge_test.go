package policy

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Code outside this package must not be able to obtain a usable
// Decision other than from Decide or Redecide. Three checks: the type's
// shape (a tripwire), forgeries compiled against the real package, and a
// scan of the tree for the only tools that could get round the compiler.

const modulePath = "wntrmute.dev/boxmaker"
const policyPath = modulePath + "/cmd/brokerd/internal/policy"

func TestDecisionShape(t *testing.T) {
	typ := reflect.TypeFor[Decision]()
	if typ.NumField() != 1 {
		t.Fatalf("Decision has %d fields; it must hold exactly one unexported pointer", typ.NumField())
	}
	f := typ.Field(0)
	if f.IsExported() || f.Type.Kind() != reflect.Pointer || f.Type.Elem().PkgPath() != policyPath {
		t.Errorf("Decision's field %s %s must be an unexported pointer to a type of this package", f.Name, f.Type)
	}
	var d Decision
	//lint:ignore SA9005 the test is that decoding cannot fill a Decision
	if err := json.Unmarshal([]byte(`{"d":{"tool":"shell"},"D":{}}`), &d); err != nil || d.Valid() {
		t.Errorf("encoding/json filled a Decision: %v, valid %v", err, d.Valid())
	}
}

func moduleRoot(t *testing.T) string {
	root, err := filepath.Abs("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	return root
}

// overlayRun builds (or runs) one file placed, through go's -overlay, in a
// package beside this one under cmd/brokerd, where Go's internal rule
// lets it import this package: the most privileged place an outsider
// could be. Nothing is written into the tree.
func overlayRun(t *testing.T, verb, src string) (string, error) {
	t.Helper()
	root := moduleRoot(t)
	tmp := t.TempDir()
	file := filepath.Join(tmp, "forge.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(root, "cmd", "brokerd", "internal", "forgetest", "forge.go")
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{target: file}})
	ov := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{verb, "-overlay", ov}
	if verb == "build" {
		args = append(args, "-o", filepath.Join(tmp, "forge"))
	}
	cmd := exec.Command("go", append(args, "./cmd/brokerd/internal/forgetest")...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestForgeriesDoNotCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	tests := []struct{ name, body, want string }{
		{"field by name", `_ = policy.Decision{d: nil}`, "unexported field d"},
		{"field positionally", `_ = policy.Decision{nil}`, "implicit assignment to unexported field d"},
		{"field access", `var x policy.Decision; _ = x.d`, "x.d undefined"},
		{"conversion", `type fake struct{ d *int }; _ = policy.Decision(fake{})`, "cannot convert"},
		{"inner type", `_ = policy.decision{}`, "name decision not exported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "package main\n\nimport \"" + policyPath + "\"\n\nfunc main() {\n\t" + tt.body + "\n}\n"
			out, err := overlayRun(t, "build", src)
			if err == nil {
				t.Fatalf("a forgery compiled:\n%s", src)
			}
			if !strings.Contains(out, tt.want) {
				t.Errorf("go build failed, but not for the reason expected (%q):\n%s", tt.want, out)
			}
		})
	}
}

// TestForgeriesAreNotValid runs what does compile: the zero value,
// decoders and reflection. Each must yield a Decision that is not Valid.
func TestForgeriesAreNotValid(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	src := `package main

import (
	"bytes"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"reflect"

	"` + policyPath + `"
)

func main() {
	var zero policy.Decision
	fmt.Println("zero", zero.Valid())
	var j policy.Decision
	json.Unmarshal([]byte(` + "`" + `{"d":{"tool":"shell"}}` + "`" + `), &j)
	fmt.Println("json", j.Valid())
	var buf bytes.Buffer
	gob.NewEncoder(&buf).Encode(struct{ D *int }{new(int)})
	var g policy.Decision
	gob.NewDecoder(&buf).Decode(&g)
	fmt.Println("gob", g.Valid())
	r := reflect.New(reflect.TypeOf(zero)).Elem().Interface().(policy.Decision)
	fmt.Println("reflect.New", r.Valid())
	func() {
		defer func() { fmt.Println("reflect.Set panicked", recover() != nil) }()
		v := reflect.ValueOf(&zero).Elem().Field(0)
		v.Set(reflect.New(v.Type().Elem()))
	}()
	fmt.Println("after", zero.Valid())
}
`
	out, err := overlayRun(t, "run", src)
	if err != nil {
		t.Fatalf("go run: %v\n%s", err, out)
	}
	want := "zero false\njson false\ngob false\nreflect.New false\nreflect.Set panicked true\nafter false\n"
	if out != want {
		t.Errorf("forgeries:\n%s\nwant\n%s", out, want)
	}
}

// ForgeScan lists every .go file outside the policy package (tests
// included) that imports it together with unsafe or reflect, or that
// uses a linkname directive: the only ways round the compiler's
// privacy. Such a file
// must not exist; if one is ever needed, it needs a reviewed exception
// here.
func ForgeScan(root string) []string {
	var out []string
	fset := token.NewFileSet()
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			out = append(out, err.Error())
			return nil
		}
		// The top's vendor/ (the Nix gate's) is third parties' code.
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || p == filepath.Join(root, "vendor")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if filepath.ToSlash(filepath.Dir(rel)) == "cmd/brokerd/internal/policy" {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			out = append(out, err.Error())
			return nil
		}
		af, err := parser.ParseFile(fset, p, src, parser.ImportsOnly)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", rel, err))
			return nil
		}
		imports := map[string]bool{}
		for _, imp := range af.Imports {
			imports[strings.Trim(imp.Path.Value, `"`)] = true
		}
		if !imports[policyPath] {
			return nil
		}
		for _, bad := range []string{"unsafe", "reflect"} {
			if imports[bad] {
				out = append(out, fmt.Sprintf("%s imports the policy package and %s, which could forge a Decision", rel, bad))
			}
		}
		if strings.Contains(string(src), "go:linkname") {
			out = append(out, fmt.Sprintf("%s imports the policy package and uses go:linkname", rel))
		}
		return nil
	})
	return out
}

func TestForgeScan(t *testing.T) {
	for _, p := range ForgeScan(moduleRoot(t)) {
		t.Error(p)
	}
	// The scan must catch what it exists for.
	dir := t.TempDir()
	plant := map[string]string{
		"cmd/brokerd/internal/runner/r.go":      "package runner\nimport (\n\"unsafe\"\n\"" + policyPath + "\"\n)\nvar _ policy.Decision\nvar _ unsafe.Pointer\n",
		"cmd/brokerd/internal/runner/r_test.go": "package runner\nimport (\n\"reflect\"\n\"" + policyPath + "\"\n)\nvar _ = reflect.TypeOf(policy.Decision{})\n",
		"cmd/brokerd/internal/x/x.go":           "package x\nimport _ \"" + policyPath + "\"\n//go:linkname f\n",
		"cmd/brokerd/internal/ok/ok.go":         "package ok\nimport (\n\"reflect\"\n)\nvar _ = reflect.TypeOf(1)\n",
		"cmd/brokerd/internal/policy/p.go":      "package policy\nimport \"unsafe\"\nvar _ unsafe.Pointer\n",
	}
	for name, body := range plant {
		full := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(full), 0o755)
		os.WriteFile(full, []byte(body), 0o644)
	}
	got := ForgeScan(dir)
	for _, want := range []string{"runner/r.go imports the policy package and unsafe", "runner/r_test.go imports the policy package and reflect", "x/x.go imports the policy package and uses go:linkname"} {
		if !strings.Contains(strings.Join(got, "\n"), want) {
			t.Errorf("ForgeScan on a planted tree = %q, lacks %q", got, want)
		}
	}
	if len(got) != 3 {
		t.Errorf("ForgeScan = %q, want exactly the 3 planted defects", got)
	}
}

// TestOnlyDecideMakesDecisions: inside this package, a non-zero Decision
// is built only in Decide and Redecide, and no exported function or
// method other than those two returns one.
func TestOnlyDecideMakesDecisions(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	builders, returners := map[string]bool{}, map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range af.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			name := fn.Name.Name
			if fn.Recv != nil {
				name = "method " + name
			}
			if fn.Name.IsExported() && fn.Type.Results != nil {
				for _, r := range fn.Type.Results.List {
					if id, ok := r.Type.(*ast.Ident); ok && id.Name == "Decision" {
						returners[name] = true
					}
				}
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				if cl, ok := n.(*ast.CompositeLit); ok && len(cl.Elts) > 0 {
					if id, ok := cl.Type.(*ast.Ident); ok && id.Name == "Decision" {
						builders[name] = true
					}
				}
				return true
			})
		}
	}
	// DecideAllowing is Decide with the owner's session allowances
	// (rule 10): it builds a Decision only where Decide would ask.
	// ListTools (mcp.go) is the owner's listing of a declared MCP server
	// for bxctl mcp pin (admin.sock): no network, mount or secret, and
	// its toolkit calls no tool.
	want := map[string]bool{"Decide": true, "Redecide": true, "DecideAllowing": true, "ListTools": true}
	if !reflect.DeepEqual(builders, want) {
		t.Errorf("non-zero Decisions are built in %v; want only Decide, Redecide, DecideAllowing and ListTools", builders)
	}
	if !reflect.DeepEqual(returners, want) {
		t.Errorf("exported functions returning a Decision: %v; want only Decide, Redecide, DecideAllowing and ListTools", returners)
	}
}
