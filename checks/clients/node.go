package clients

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// dir is this package's directory: the scripts and the lockfile.
func dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// Modules returns the node_modules directory checks/npm-setup installed
// for the current lockfile, and node's path. Without either it skips t
// with one line, or fails it when CI is set.
func Modules(t testing.TB) (modules, node string) {
	t.Helper()
	missing := func(why string) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatalf("%s; CI is set, so the official-client suite may not skip (run checks/npm-setup; docs/clients.md)", why)
			return
		}
		t.Skipf("%s: the official-client suite is skipped (run checks/npm-setup; docs/clients.md)", why)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("no node on PATH")
		return "", ""
	}
	lock, err := os.ReadFile(filepath.Join(dir(), "package-lock.json"))
	if err != nil {
		t.Fatalf("read the lockfile: %v", err)
	}
	sum := sha256.Sum256(lock)
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	modules = filepath.Join(cache, "boxmaker", "npm", hex.EncodeToString(sum[:]), "node_modules")
	if _, err := os.Stat(filepath.Join(modules, ".package-lock.json")); err != nil {
		missing("the client packages are not installed at " + modules)
		return "", ""
	}
	return modules, node
}

// Run runs script (a file of this package) under node with input as JSON
// on stdin, and decodes its stdout into out. Stderr is logged.
func Run(t testing.TB, script string, input, out any) {
	t.Helper()
	modules, node := Modules(t)
	in, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir(), script))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if stderr.Len() > 0 {
		t.Logf("%s stderr:\n%s", script, stderr.String())
	}
	if err != nil {
		t.Fatalf("node %s: %v", script, err)
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("node %s: its answer is not JSON: %v\n%s", script, err, stdout.String())
	}
}
