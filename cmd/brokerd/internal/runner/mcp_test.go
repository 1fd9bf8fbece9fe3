package runner

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/mcptest"
	"wntrmute.dev/boxmaker/checks/podmantest"
	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/tool/grant"
	"wntrmute.dev/boxmaker/pkg/tool/mcppin"
	"wntrmute.dev/boxmaker/pkg/tool/mcpserver"
)

// mcpServer declares the test server in image, started in mode.
func mcpServer(t testing.TB, image, mode string) mcpserver.Server {
	t.Helper()
	s, err := mcpserver.NewServer("test", mcpserver.Spec{Image: image, Command: []string{mcptest.ServerPath, mode}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mcpResult runs d and reads the toolkit's envelope.
func mcpResult(t testing.TB, p *Podman, d policy.Decision) mcppin.Result {
	t.Helper()
	out := run(t, p, d)
	r, err := mcppin.ParseResult([]byte(out.Stdout))
	if err != nil || out.Exit != 0 {
		t.Fatalf("%s: exit %d, stderr %q, stdout %.300q: %v", d.Tool(), out.Exit, out.Stderr, out.Stdout, err)
	}
	return r
}

// pinned lists the server (ListTools: no network, no mount) and pins it.
func pinned(t testing.TB, p *Podman, s mcpserver.Server) mcppin.Pin {
	t.Helper()
	r := mcpResult(t, p, policy.ListTools(s, time.Now()))
	if r.Status != mcppin.StatusListing {
		t.Fatalf("listing = %+v", r)
	}
	pin, err := mcppin.NewPin(s.Name(), s.Image(), r.Listing)
	if err != nil {
		t.Fatal(err)
	}
	return pin
}

// decideMCP decides call_tool of mcp.test.TOOL under grants, with server
// s declared and pinned as pin.
func decideMCP(t testing.TB, s mcpserver.Server, pin mcppin.Pin, grants, tool string, args any) policy.Decision {
	t.Helper()
	gs, ps := grant.ParseFile("test.toml", []byte(grants))
	if len(ps) > 0 {
		t.Fatalf("grants: %v", ps)
	}
	set, _ := grant.NewSet(gs...)
	cat, err := mcpserver.NewCatalog(mcpserver.Entry{Server: s, Pin: &pin})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(map[string]any{"name": "mcp.test." + tool, "arguments": args})
	d, ask, den := policy.Decide(set, policy.Request{Tool: "call_tool", Arguments: raw, MCP: cat}, policy.Session{Taint: dataclass.Private}, time.Now())
	if ask != nil || den != nil {
		t.Fatalf("%s: not allowed: ask %v, denial %v", tool, ask != nil, den)
	}
	return d
}

func mcpGrant(tool string, extra ...string) string {
	return "[[grant]]\nid = \"" + strings.ReplaceAll(tool, "_", "-") + "\"\ntool = \"mcp.test." + tool + "\"\nmax_taint = \"secret\"\nmode = \"auto\"\n" + strings.Join(extra, "\n") + "\n"
}

// TestMCPCallOverPodman: the test server, in an image of its own with the
// toolkit mounted from the tool image, is listed, pinned and called in
// fresh containers; a server whose listing changed since the pin is
// refused with drift; it sees only the granted path and has no network;
// and no container is left behind.
func TestMCPCallOverPodman(t *testing.T) {
	svc := podmantest.Require(t)
	p := newRunner(t, svc, svc.ToolImage(t), nil)
	img := mcptest.ServerImage(t, svc)
	s := mcpServer(t, img, "pinned")
	pin := pinned(t, p, s)

	r := mcpResult(t, p, decideMCP(t, s, pin, mcpGrant("echo"), "echo", map[string]string{"message": "hi"}))
	if r.Status != mcppin.StatusOK || len(r.Content) != 1 || r.Content[0].Text != "echo: hi" {
		t.Errorf("echo = %+v", r)
	}

	for _, mode := range []string{"description", "schema", "rename"} {
		drifted := mcpServer(t, img, mode)
		r := mcpResult(t, p, decideMCP(t, drifted, pin, mcpGrant("echo"), "echo", map[string]string{"message": "hi"}))
		if r.Status != mcppin.StatusDrift || len(r.Listing) == 0 {
			t.Errorf("%s: %+v, want drift", mode, r)
		}
	}

	granted, other := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(granted, "note.txt"), []byte("granted text"), 0o644)
	os.WriteFile(filepath.Join(other, "secret.txt"), []byte("not granted"), 0o644)
	os.Chmod(granted, 0o755)
	os.Chmod(other, 0o755)
	read := mcpGrant("read", `paths = ["`+granted+`"]`)
	if r := mcpResult(t, p, decideMCP(t, s, pin, read, "read", map[string]string{"path": filepath.Join(granted, "note.txt")})); r.Status != mcppin.StatusOK || r.Content[0].Text != "granted text" {
		t.Errorf("read granted = %+v", r)
	}
	if r := mcpResult(t, p, decideMCP(t, s, pin, read, "read", map[string]string{"path": filepath.Join(other, "secret.txt")})); r.Status != mcppin.StatusToolError || strings.Contains(r.Content[0].Text, "not granted") {
		t.Errorf("read another path = %+v, want no such file", r)
	}

	// No network without hosts: the host's listener, reachable from the
	// host itself (the positive control), is not reached from the server.
	ln, accepted := tripwire(t, "tcp4", "0.0.0.0:0")
	port := ln.Addr().(*net.TCPAddr).Port
	for _, a := range hostTargets(t) {
		addr := net.JoinHostPort(a, fmt.Sprint(port))
		c, err := net.DialTimeout("tcp4", addr, 2*time.Second)
		if err != nil {
			t.Fatalf("the host's own listener is not reachable at %s: %v", addr, err)
		}
		c.Close()
		<-accepted
		if r := mcpResult(t, p, decideMCP(t, s, pin, mcpGrant("dial"), "dial", map[string]string{"address": addr})); !strings.Contains(r.Content[0].Text, "dial failed") {
			t.Errorf("dial %s without hosts = %+v, want no network", addr, r)
		}
	}
	select {
	case <-accepted:
		t.Error("the server reached the host's listener")
	default:
	}
	if l := leftovers(t, svc, p); len(l) > 0 {
		t.Errorf("containers left behind: %v", l)
	}
}

// TestMCPCallLeavesNothing: a server that plants a file in its /tmp and
// starts a detached process writing into its granted directory neither
// survives its call (the writes stop once the call is over) nor leaves
// the file to the next call, which runs in a fresh container.
func TestMCPCallLeavesNothing(t *testing.T) {
	svc := podmantest.Require(t)
	p := newRunner(t, svc, svc.ToolImage(t), nil)
	s := mcpServer(t, mcptest.ServerImage(t, svc), "pinned")
	pin := pinned(t, p, s)
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	plant := mcpGrant("plant", `paths = ["`+dir+`"]`, "writable = true")
	if r := mcpResult(t, p, decideMCP(t, s, pin, plant, "plant", map[string]string{"path": dir})); r.Status != mcppin.StatusOK || r.Content[0].Text != "planted" {
		t.Fatalf("plant = %+v", r)
	}
	// The call is over and its container removed: whatever it started
	// is gone with it, so the file it appended to stops growing.
	size := func() int64 {
		fi, err := os.Stat(filepath.Join(dir, "alive"))
		if err != nil {
			return -1
		}
		return fi.Size()
	}
	first := size()
	if first <= 0 {
		t.Fatalf("the planted process never wrote to %s/alive", dir)
	}
	time.Sleep(2 * time.Second)
	if now := size(); now != first {
		t.Errorf("the planted process outlived its call: %s/alive grew from %d to %d bytes", dir, first, now)
	}
	if r := mcpResult(t, p, decideMCP(t, s, pin, mcpGrant("read"), "read", map[string]string{"path": "/tmp/planted"})); r.Status != mcppin.StatusToolError {
		t.Errorf("the next call found the planted file: %+v", r)
	}
	if l := leftovers(t, svc, p); len(l) > 0 {
		t.Errorf("containers left behind: %v", l)
	}
}

// TestMCPServerCannotForgeTheResult: the server runs as the toolkit's
// uid in the same container, but the toolkit is not dumpable, so the
// server cannot open the toolkit's stdout through /proc and write
// brokerd a result of its own.
func TestMCPServerCannotForgeTheResult(t *testing.T) {
	svc := podmantest.Require(t)
	p := newRunner(t, svc, svc.ToolImage(t), nil)
	s := mcpServer(t, mcptest.ServerImage(t, svc), "pinned")
	pin := pinned(t, p, s)
	out := run(t, p, decideMCP(t, s, pin, mcpGrant("forge"), "forge", map[string]string{}))
	if strings.Contains(out.Stdout, "FORGED") {
		t.Fatalf("the server wrote the toolkit's result: %q", out.Stdout)
	}
	r, err := mcppin.ParseResult([]byte(out.Stdout))
	if err != nil || len(r.Content) != 1 || !strings.Contains(r.Content[0].Text, "permission denied") {
		t.Errorf("forge = %+v, %v; want the server's own answer that /proc refused it", r, err)
	}
}
