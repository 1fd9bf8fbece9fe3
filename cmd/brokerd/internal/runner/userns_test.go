package runner

import (
	"strings"
	"sync"
	"testing"
)

// TestRootfulCallsGetTheirOwnUsers: on a rootful service two calls
// running at the same time each run in a user namespace of their own,
// with different host ranges, none of which holds the host's root; so
// their 65534 is neither each other's nor the host's nobody.
func TestRootfulCallsGetTheirOwnUsers(t *testing.T) {
	_, p := toolRunner(t, nil)
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
