package runner

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// TestRootfulCallsGetTheirOwnUsers: on a rootful service two calls
// running at the same time each run in a user namespace of their own,
// with different host ranges, none of which holds the host's root; so
// their 65534 is neither each other's nor the host's nobody.
//
// Rootless, keep-id instead maps each call's 65534 to the service's own
// user (uid 0 of the user's namespace, the one id the kernel gives it),
// so a file a call writes is that user's on the host
// (TestRootlessCallsAreTheUser).
func TestRootfulCallsGetTheirOwnUsers(t *testing.T) {
	svc, p := toolRunner(t, nil)
	if svc.Rootless {
		testRootlessCallsAreTheUser(t, p)
		return
	}
	dir := t.TempDir()
	var wg sync.WaitGroup
	outs := make([]Output, 2)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i] = shellIn(t, p, dir, false, "cat /proc/self/uid_map; id -u; sleep 3")
		}()
	}
	wg.Wait()
	var ranges []string
	for _, o := range outs {
		f := strings.Fields(o.Stdout)
		if o.Exit != 0 || len(f) != 4 || f[0] != "0" || f[1] == "0" || f[2] != "65536" || f[3] != "65534" {
			t.Fatalf("a call's uid map and uid: %+v; want 0 HOSTBASE 65536 (HOSTBASE not 0) and 65534", o)
		}
		ranges = append(ranges, f[1])
	}
	if ranges[0] == ranges[1] {
		t.Errorf("two concurrent calls share the host range %s", ranges[0])
	}
	t.Logf("host ranges: %v", ranges)
}

// testRootlessCallsAreTheUser: on a rootless service a call runs as
// 65534 in a user namespace whose only id maps to the service's user
// (keep-id), never to the host's root or a subordinate id, and what it
// writes in a writable grant belongs to that user on the host.
func testRootlessCallsAreTheUser(t *testing.T, p *Podman) {
	dir := t.TempDir()
	out := shellIn(t, p, dir, true, "cat /proc/self/uid_map; id -u; echo x > made")
	var maps [][]string
	for _, l := range strings.Split(strings.TrimSpace(out.Stdout), "\n") {
		maps = append(maps, strings.Fields(l))
	}
	// One line maps 65534 to the parent namespace's 0 (the user); the
	// others, if any, map other ids into the subordinate range, never
	// to 0; and the last line is id -u.
	var keep int
	for _, f := range maps[:max(len(maps)-1, 0)] {
		if len(f) == 3 && f[0] == "65534" && f[1] == "0" && f[2] == "1" {
			keep++
		} else if len(f) != 3 || f[1] == "0" {
			t.Errorf("uid map line %q: want only 65534 mapped to the user", f)
		}
	}
	if out.Exit != 0 || keep != 1 || len(maps) == 0 || strings.Join(maps[len(maps)-1], "") != "65534" {
		t.Fatalf("a rootless call's uid map and uid: %+v; want 65534 0 1 (keep-id) and uid 65534", out)
	}
	fi, err := os.Stat(filepath.Join(dir, "made"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Getuid() {
		t.Errorf("a file a rootless call wrote is owned by uid %d on the host, want the service's user %d", st.Uid, os.Getuid())
	}
	t.Logf("rootless call: %q", out.Stdout)
}
