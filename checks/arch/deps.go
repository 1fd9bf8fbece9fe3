package arch

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Rule forbids a binary to link packages under a prefix.
type Rule struct {
	Binary string // cmd/<Binary>
	Prefix string // an import path, or a prefix ending in "/"
	Why    string
	// Only, if set, is the one module through which the binary may link
	// Prefix: every package that imports it directly must be under Only.
	// For a package of a required module that links it unreachably (as
	// modernc.org/libc links os/exec for system(3), which SQLite never
	// calls); docs/decisions.md records each such exception.
	Only string
}

// Rules are the imports each role must never have. A rule for a binary
// that does not exist yet is skipped; it takes effect when the role lands.
var Rules = []Rule{
	{"loopd", "wntrmute.dev/boxmaker/pkg/host/secret", "loopd holds no credential", ""},
	{"loopd", "github.com/containers/", "only brokerd's runner drives Podman", ""},
	{"loopd", "os/exec", "loopd runs nothing; tools run in containers", ""},
	{"inferproxy", "wntrmute.dev/boxmaker/pkg/host/secret", "inferproxy holds no credential", ""},
	{"inferproxy", "net/http", "inferproxy copies bytes and parses no HTTP", ""},
	{"inferproxy", "os/exec", "inferproxy runs nothing", ""},
	{"inferproxy", "github.com/containers/", "only brokerd's runner drives Podman", ""},
	{"gatewayd", "github.com/containers/", "only brokerd's runner drives Podman", ""},
	{"gatewayd", "os/exec", "gatewayd runs nothing", ""},
	{"memoryd", "github.com/containers/", "only brokerd's runner drives Podman", ""},
	{"memoryd", "os/exec", "memoryd runs nothing", "modernc.org/libc"},
	{"memoryd", "wntrmute.dev/boxmaker/pkg/model/llama", "memoryd reads the session log's messages (package chat) and never talks to the model", ""},
	{"toolkit", "github.com/containers/", "tools do not drive Podman", ""},
	{"toolkit", "wntrmute.dev/boxmaker/pkg/tool/grant", "the toolkit runs decided calls; it never reads grants", ""},
	{"toolkit", "wntrmute.dev/boxmaker/pkg/logs/audit", "the audit log is brokerd's alone", ""},
	{"toolkit", "wntrmute.dev/boxmaker/pkg/socket/wire", "the toolkit speaks only the stdin envelope and SOCKS5, never the daemons' sockets", ""},
	{"toolkit", "wntrmute.dev/boxmaker/pkg/socket/sockets", "the toolkit serves no daemon socket", ""},
	{"bxctl", "github.com/containers/", "the owner's CLI does not drive Podman", ""},
}

func init() {
	// testify is for tests (docs/design.md#testing): no role links it.
	for _, bin := range []string{"brokerd", "bxctl", "gatewayd", "inferproxy", "loopd", "memoryd", "toolkit"} {
		Rules = append(Rules, Rule{bin, "github.com/stretchr/testify/", "testify is for tests only", ""})
	}
}

// Binaries lists the roles that exist: the directories under cmd/ with a
// main.go.
func Binaries(root string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(root, "cmd"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(root, "cmd", e.Name(), "main.go")); err == nil {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// DepsFile is where a binary's dependency list is checked in.
func DepsFile(root, bin string) string { return filepath.Join(root, "cmd", bin, "deps.txt") }

// TagsFile, if present, holds the build tags a binary is built with.
func TagsFile(root, bin string) string { return filepath.Join(root, "cmd", bin, "tags.txt") }

// modFlag is how go list finds the modules: the tree's vendor/ where it
// has one (the Nix gate's: buildGoModule vendors them, and the sandbox
// has no module cache and no network), the module cache otherwise.
func modFlag(root string) string {
	if _, err := os.Stat(filepath.Join(root, "vendor", "modules.txt")); err == nil {
		return "-mod=vendor"
	}
	return "-mod=mod"
}

// ListDeps runs go list for one binary: every package it links, the
// standard library's public packages included, one per line, sorted.
func ListDeps(root, bin string) ([]byte, error) {
	args := []string{"list", "-deps"}
	if tags, err := os.ReadFile(TagsFile(root, bin)); err == nil {
		args = append(args, "-tags", strings.Join(strings.Fields(string(tags)), ","))
	}
	args = append(args, "-f", "{{.ImportPath}} {{.Standard}}", "./cmd/"+bin)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS="+modFlag(root))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %v: %s", bin, err, stderr.String())
	}
	// The standard library's internal and vendored packages change with
	// Go patch releases and say nothing about what a role can do; leave
	// them out so the list tracks our choices, not the toolchain's.
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, std, _ := strings.Cut(l, " ")
		if std == "true" && (strings.HasPrefix(path, "vendor/") || strings.HasPrefix(path, "internal/") || strings.Contains(path, "/internal/")) {
			continue
		}
		lines = append(lines, path)
	}
	slices.Sort(lines)
	return []byte(strings.Join(lines, "\n") + "\n"), nil
}

// Deps compares each binary's dependencies with its deps.txt and checks
// the Rules. With update it rewrites the files instead of reporting drift
// (`make deps`); the rules are checked either way.
func Deps(root string, update bool) []string {
	bins, err := Binaries(root)
	if err != nil {
		return []string{err.Error()}
	}
	if len(bins) == 0 {
		return []string{"no binaries under cmd/: the check would pass vacuously"}
	}
	var out []string
	for _, bin := range bins {
		got, err := ListDeps(root, bin)
		if err != nil {
			out = append(out, err.Error())
			continue
		}
		for _, r := range Rules {
			if r.Binary != bin {
				continue
			}
			if r.Only != "" {
				out = append(out, importersOutside(root, bin, r)...)
				continue
			}
			for _, p := range strings.Fields(string(got)) {
				if p == r.Prefix || (strings.HasSuffix(r.Prefix, "/") && strings.HasPrefix(p, r.Prefix)) {
					out = append(out, fmt.Sprintf("cmd/%s links %s: %s", bin, p, r.Why))
				}
			}
		}
		file := DepsFile(root, bin)
		if update {
			if err := os.WriteFile(file, got, 0o644); err != nil {
				out = append(out, err.Error())
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			out = append(out, fmt.Sprintf("cmd/%s/deps.txt: %v (run make deps)", bin, err))
			continue
		}
		if !bytes.Equal(got, want) {
			out = append(out, fmt.Sprintf("cmd/%s/deps.txt is out of date: %s (review, then run make deps)", bin, diff(want, got)))
		}
	}
	return out
}

// diff names the packages added and removed, which is what a reviewer of
// a dependency change needs to see.
func diff(old, cur []byte) string {
	o, c := strings.Fields(string(old)), strings.Fields(string(cur))
	var added, removed []string
	for _, p := range c {
		if !slices.Contains(o, p) {
			added = append(added, p)
		}
	}
	for _, p := range o {
		if !slices.Contains(c, p) {
			removed = append(removed, p)
		}
	}
	return fmt.Sprintf("added %v, removed %v", added, removed)
}

// Modules reports modules required in go.mod with no mention in
// docs/dependencies.md.
func Modules(root string) []string {
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return []string{err.Error()}
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "dependencies.md"))
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	inBlock := false
	for _, line := range strings.Split(string(gomod), "\n") {
		line = strings.TrimSpace(line)
		var mod string
		switch {
		case line == "require (":
			inBlock = true
		case inBlock && line == ")":
			inBlock = false
		case inBlock && line != "" && !strings.HasPrefix(line, "//"):
			mod = strings.Fields(line)[0]
		case strings.HasPrefix(line, "require "):
			mod = strings.Fields(line)[1]
		}
		if mod != "" && !strings.Contains(string(doc), "`"+mod+"`") {
			out = append(out, fmt.Sprintf("go.mod requires %s, which docs/dependencies.md does not justify", mod))
		}
	}
	return out
}

// importersOutside reports the packages of bin that import r.Prefix
// directly and are not under r.Only.
func importersOutside(root, bin string, r Rule) []string {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./cmd/"+bin)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS="+modFlag(root))
	b, err := cmd.Output()
	if err != nil {
		return []string{fmt.Sprintf("go list %s: %v", bin, err)}
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] == r.Only || strings.HasPrefix(f[0], r.Only+"/") {
			continue
		}
		for _, imp := range f[1:] {
			if imp == r.Prefix || (strings.HasSuffix(r.Prefix, "/") && strings.HasPrefix(imp, r.Prefix)) {
				out = append(out, fmt.Sprintf("cmd/%s: %s imports %s: %s", bin, f[0], imp, r.Why))
			}
		}
	}
	return out
}
