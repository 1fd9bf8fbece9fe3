package arch

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

var update = flag.Bool("update", false, "rewrite cmd/*/deps.txt from go list")

const root = "../.."

func report(t *testing.T, problems []string) {
	t.Helper()
	for _, p := range problems {
		t.Error(p)
	}
}

// The checks on this repository.

func TestRepoLengths(t *testing.T)    { report(t, Lengths(root)) }
func TestRepoImports(t *testing.T)    { report(t, Imports(root)) }
func TestRepoDocs(t *testing.T)       { report(t, Docs(root)) }
func TestRepoRunbook(t *testing.T)    { report(t, Runbook(root)) }
func TestRepoModules(t *testing.T)    { report(t, Modules(root)) }
func TestRepoDeps(t *testing.T)       { report(t, Deps(root, *update)) }
func TestRepoTop(t *testing.T)        { report(t, Top(root)) }
func TestRepoStdlibOnly(t *testing.T) { report(t, StdlibOnly(root)) }
func TestRepoTestOnly(t *testing.T)   { report(t, TestOnly(root)) }
func TestRepoToolLists(t *testing.T) {
	report(t, ToolLists(root, toolset.Names()))
}

// The same checks on planted trees, each of which must be caught.

// plant writes files (path → contents) under a fresh module root.
func plant(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if _, ok := files["go.mod"]; !ok {
		files["go.mod"] = "module example.com/m\n\ngo 1.26\n"
	}
	for p, body := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func expect(t *testing.T, problems []string, want string) {
	t.Helper()
	for _, p := range problems {
		if strings.Contains(p, want) {
			return
		}
	}
	t.Errorf("problems %q do not include %q: the check did not catch the planted defect", problems, want)
}

func TestPlantedLongFile(t *testing.T) {
	ok := "// Package a is fine.\npackage a\n" + strings.Repeat("\n", MaxLines-2)
	long := "// Package b is not.\npackage b\n" + strings.Repeat("\n", MaxLines-1)
	dir := plant(t, map[string]string{"pkg/a/a.go": ok, "pkg/b/b.go": long})
	got := Lengths(dir)
	if len(got) != 1 {
		t.Fatalf("Lengths = %q, want exactly the 501-line file", got)
	}
	expect(t, got, "pkg/b/b.go: 501 lines")
}

func TestPlantedTestOnly(t *testing.T) {
	dir := plant(t, map[string]string{
		"pkg/r/testonly.go": "package r\n\nfunc TestOnlyLoosen() {}\n\nfunc inner() { TestOnlyLoosen() }\n",
		"pkg/r/r_test.go":   "package r\n\nfunc helper() { TestOnlyLoosen() }\n",
		"cmd/x/main.go":     "package main\n\nimport \"example.com/m/pkg/r\"\n\nfunc main() { r.TestOnlyLoosen() }\n",
		"pkg/q/q.go":        "package q\n\nfunc f() { g := TestOnlyLocal; g() }\n\nfunc TestOnlyLocal() {}\n\nfunc h() { TestOnlyLocal() }\n",
	})
	got := TestOnly(dir)
	expect(t, got, "cmd/x/main.go:5: a product file names TestOnlyLoosen")
	for _, line := range []int{3, 5, 7} {
		expect(t, got, fmt.Sprintf("pkg/q/q.go:%d: a product file names TestOnlyLocal", line))
	}
	if len(got) != 4 {
		t.Errorf("want exactly the product files' four uses (none from a test or a testonly.go), got %q", got)
	}
}

func TestPlantedTop(t *testing.T) {
	dir := plant(t, map[string]string{"cmd/x/main.go": "package main\n", "scripts/setup": "#!/bin/sh\n", "internal/a/a.go": "package a\n", ".gitignore": "/bin/\n", "bin/bxctl": ""})
	got := Top(dir)
	expect(t, got, "scripts: not one of the top level's entries")
	expect(t, got, "internal: not one of the top level's entries")
	expect(t, got, "flake.nix: missing from the top level")
	expect(t, got, "modules: missing from the top level")
	// cmd and go.mod (plant writes one) are there; every other required entry is missing.
	if want := 2 + len(Required) - 2; len(got) != want {
		t.Errorf("Top = %q, want %d lines: scripts, internal and each missing entry (bin/ is ignored build output)", got, want)
	}
}

func TestPlantedImports(t *testing.T) {
	dir := plant(t, map[string]string{
		"pkg/core/core.go":                      "// Package core imports a role.\npackage core\nimport _ \"example.com/m/cmd/loopd/internal/x\"\n",
		"cmd/brokerd/internal/p/p.go":           "// Package p imports another role.\npackage p\nimport _ \"example.com/m/cmd/loopd/internal/x\"\n",
		"cmd/brokerd/internal/q/q_test.go":      "package q\nimport _ \"example.com/m/cmd/gatewayd\"\n",
		"cmd/loopd/internal/y/y.go":             "// Package y imports its own role, which is fine.\npackage y\nimport _ \"example.com/m/cmd/loopd/internal/x\"\n",
		"cmd/brokerd/internal/broker/b.go":      "// Package broker drives Podman itself.\npackage broker\nimport _ \"github.com/containers/podman/v5/pkg/bindings\"\n",
		"cmd/brokerd/internal/runner/r.go":      "// Package runner may.\npackage runner\nimport _ \"github.com/containers/podman/v5/pkg/bindings\"\n",
		"cmd/brokerd/internal/broker/b_test.go": "package broker\nimport _ \"github.com/containers/podman/v5/pkg/bindings\"\n",
		"cmd/loopd/internal/z/z.go":             "// Package z links a test double.\npackage z\nimport _ \"example.com/m/checks/fake/llama\"\n",
		"pkg/w/w.go":                            "// Package w links a harness.\npackage w\nimport _ \"example.com/m/checks/stack\"\n",
		"cmd/loopd/internal/z/z_test.go":        "package z\nimport _ \"example.com/m/checks/fake/llama\"\n",
		"checks/stack/s.go":                     "// Package stack may use the fakes.\npackage stack\nimport _ \"example.com/m/checks/fake/llama\"\n",
	})
	got := Imports(dir)
	expect(t, got, "cmd/brokerd/internal/broker/b.go: imports github.com/containers/podman/v5/pkg/bindings; only cmd/brokerd/internal/runner drives Podman")
	expect(t, got, "pkg/core/core.go: pkg/ imports example.com/m/cmd/loopd/internal/x")
	expect(t, got, "cmd/brokerd/internal/p/p.go: role brokerd imports role loopd")
	expect(t, got, "cmd/brokerd/internal/q/q_test.go: role brokerd imports role gatewayd")
	expect(t, got, "cmd/loopd/internal/z/z.go: imports example.com/m/checks/fake/llama; no product package may import checks/")
	expect(t, got, "pkg/w/w.go: imports example.com/m/checks/stack; no product package may import checks/")
	if len(got) != 6 {
		t.Errorf("Imports = %q, want exactly 6 problems (a role importing itself, the runner and a test importing the bindings, a test or checks/ importing checks/ are fine)", got)
	}
}

func TestPlantedDocs(t *testing.T) {
	dir := plant(t, map[string]string{
		"pkg/good/good.go":         "// Package good is documented.\npackage good\n",
		"pkg/good/good_test.go":    "package good\n",
		"pkg/bare/bare.go":         "package bare\n",
		"pkg/wrong/wrong.go":       "// Some comment.\npackage wrong\n",
		"pkg/testonly/t_test.go":   "// Package testonly is a test-only package.\npackage testonly\n",
		"pkg/testdoc/a.go":         "package testdoc\n",
		"pkg/testdoc/a_test.go":    "// Package testdoc is documented only in a test.\npackage testdoc\n",
		"cmd/tool/main.go":         "// Command tool is documented.\npackage main\n",
		"cmd/undocumented/main.go": "package main\n",
	})
	got := Docs(dir)
	expect(t, got, "pkg/bare: package bare has no doc comment")
	expect(t, got, "pkg/wrong: package wrong has no doc comment")
	expect(t, got, "pkg/testdoc: package testdoc has no doc comment")
	expect(t, got, "cmd/undocumented: package main has no doc comment")
	if len(got) != 4 {
		t.Errorf("Docs = %q, want exactly 4 problems", got)
	}
}

const entry = "\n**What you see**\nx\n**Why**\nx\n**How to confirm**\nx\n**How to fix**\nx\n**How to check**\nx\n"

// pointer builds a runbook pointer without writing one literally here,
// so that this file does not itself point at the planted anchors.
func pointer(anchor string) string { return "see docs/" + "runbook.md#" + anchor }

func TestPlantedRunbook(t *testing.T) {
	dir := plant(t, map[string]string{
		"pkg/a/a.go":      "// Package a refuses.\npackage a\nconst m = \"no; " + pointer("present") + "\"\nconst n = \"no; " + pointer("missing-anchor") + "\"\n",
		"docs/runbook.md": "# Runbook\n\n## present" + entry + "\n## unreferenced" + entry + "\n## partial\n**What you see**\nx\n",
	})
	got := Runbook(dir)
	expect(t, got, "pkg/a/a.go:4: points at docs/runbook.md#missing-anchor, which has no entry")
	expect(t, got, "docs/runbook.md#unreferenced: no source points at this entry")
	expect(t, got, "docs/runbook.md#partial: entry lacks **Why**")
	for _, p := range got {
		if strings.Contains(p, "#present") {
			t.Errorf("a complete, referenced entry was reported: %s", p)
		}
	}
	empty := plant(t, map[string]string{"pkg/a/a.go": "// Package a.\npackage a\n", "docs/runbook.md": "# Runbook\n"})
	expect(t, Runbook(empty), "no runbook pointer found")
}

func TestPlantedDeps(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	dir := plant(t, map[string]string{
		"cmd/inferproxy/main.go":  "// Command inferproxy.\npackage main\nimport (\n_ \"net/http\"\n_ \"fmt\"\n)\nfunc main() {}\n",
		"cmd/inferproxy/deps.txt": "fmt\n",
	})
	got := Deps(dir, false)
	expect(t, got, "cmd/inferproxy/deps.txt is out of date: added [")
	expect(t, got, "cmd/inferproxy links net/http: inferproxy copies bytes and parses no HTTP")
	// After make deps the drift is gone, but the rule still holds.
	Deps(dir, true)
	got = Deps(dir, false)
	for _, p := range got {
		if strings.Contains(p, "out of date") {
			t.Errorf("after update: %s", p)
		}
	}
	expect(t, got, "cmd/inferproxy links net/http")
}

// TestPlantedDepsOnly: a rule with Only lets the binary link the package
// through that module alone; the role's own import of it is reported.
func TestPlantedDepsOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	dir := plant(t, map[string]string{
		"cmd/memoryd/main.go":  "// Command memoryd.\npackage main\nimport _ \"os/exec\"\nfunc main() {}\n",
		"cmd/memoryd/deps.txt": "",
	})
	expect(t, Deps(dir, true), "cmd/memoryd: example.com/m/cmd/memoryd imports os/exec: memoryd runs nothing")
}

func TestPlantedModules(t *testing.T) {
	dir := plant(t, map[string]string{
		"go.mod":               "module example.com/m\n\ngo 1.26\n\nrequire (\n\tgithub.com/ok/one v1.0.0\n\tgithub.com/sneaky/two v1.0.0 // indirect\n)\n\nrequire github.com/sneaky/three v0.1.0\n",
		"docs/dependencies.md": "| `github.com/ok/one` | fine |\n",
	})
	got := Modules(dir)
	expect(t, got, "github.com/sneaky/two")
	expect(t, got, "github.com/sneaky/three")
	if len(got) != 2 {
		t.Errorf("Modules = %q, want the two undocumented modules", got)
	}
}

// TestPlantedDepsOwnPackages plants, for every rule on a package of this
// module, a binary that imports it: each must be reported.
func TestPlantedDepsOwnPackages(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	const mod = "wntrmute.dev/boxmaker/"
	files := map[string]string{"go.mod": "module wntrmute.dev/boxmaker\n\ngo 1.26\n"}
	var planted []Rule
	for _, r := range Rules {
		sub, ok := strings.CutPrefix(r.Prefix, mod)
		if !ok || r.Only != "" {
			continue
		}
		planted = append(planted, r)
		name := sub[strings.LastIndex(sub, "/")+1:]
		files[sub+"/p.go"] = "// Package " + name + " is planted.\npackage " + name + "\n"
		main := "cmd/" + r.Binary + "/main.go"
		if files[main] == "" {
			files[main] = "// Command " + r.Binary + " is planted.\npackage main\nfunc main() {}\n"
			files["cmd/"+r.Binary+"/deps.txt"] = ""
		}
		files[main] = strings.Replace(files[main], "package main\n", "package main\nimport _ \""+r.Prefix+"\"\n", 1)
	}
	if len(planted) < 6 {
		t.Fatalf("only %d rules on this module's packages: the plant would prove little", len(planted))
	}
	got := Deps(plant(t, files), true)
	for _, r := range planted {
		expect(t, got, "cmd/"+r.Binary+" links "+r.Prefix+": "+r.Why)
	}
}

func TestPlantedToolLists(t *testing.T) {
	names := []string{"clock", "recall", "memory", "shell"}
	dir := plant(t, map[string]string{
		"pkg/tool/toolset/t.go":          "// Package toolset lists them.\npackage toolset\nconst (\nClock = \"clock\"\nRecall = \"recall\"\n)\n",
		"cmd/loopd/internal/x/x.go":      "// Package x keeps a second list.\npackage x\nfunc IsMemory(n string) bool { return n == \"recall\" || n == \"memory\" }\n",
		"cmd/loopd/internal/y/y.go":      "// Package y keeps one as a slice.\npackage y\nvar tools = []string{\"shell\", \"clock\"}\n",
		"cmd/memoryd/internal/z/z.go":    "// Package z names a directory.\npackage z\nconst dir = \"memory\"\nfunc f() string { return \"clock\" }\n",
		"cmd/loopd/internal/x/x_test.go": "package x\nvar all = []string{\"recall\", \"memory\", \"clock\"}\n",
	})
	got := ToolLists(dir, names)
	expect(t, got, `cmd/loopd/internal/x/x.go:3: spells the tool names ["recall" "memory"]`)
	expect(t, got, `cmd/loopd/internal/y/y.go:3: spells the tool names ["shell" "clock"]`)
	if len(got) != 2 {
		t.Errorf("ToolLists = %q, want exactly 2 problems (the home, one name per declaration and tests are fine)", got)
	}
}

func TestPlantedStdlibOnly(t *testing.T) {
	dir := plant(t, map[string]string{
		"pkg/model/chat/chat.go":     "// Package chat links the client.\npackage chat\nimport (\n_ \"encoding/json\"\n_ \"example.com/m/pkg/model/llama\"\n)\n",
		"pkg/tool/toolset/t.go":      "// Package toolset links a module.\npackage toolset\nimport _ \"golang.org/x/sys/unix\"\n",
		"pkg/tool/toolset/t_test.go": "package toolset\nimport _ \"github.com/stretchr/testify/require\"\n",
		"pkg/text/truncate/cut.go":   "// Package truncate is fine.\npackage truncate\nimport _ \"unicode/utf8\"\n",
		"pkg/model/llama/llama.go":   "// Package llama is machinery.\npackage llama\nimport _ \"golang.org/x/net/http2\"\n",
	})
	got := StdlibOnly(dir)
	expect(t, got, "pkg/model/chat/chat.go: imports example.com/m/pkg/model/llama")
	expect(t, got, "pkg/tool/toolset/t.go: imports golang.org/x/sys/unix")
	if len(got) != 2 {
		t.Errorf("StdlibOnly = %q, want exactly 2 problems (tests and other packages may import anything)", got)
	}
}
