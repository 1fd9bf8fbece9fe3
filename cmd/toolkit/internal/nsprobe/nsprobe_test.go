package nsprobe

import (
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestTryMakesNoNamespace: outside a filter, each attempt fails with the
// kernel's own error, not the filter's, and this process is still in the
// user namespace it started in.
func TestTryMakesNoNamespace(t *testing.T) {
	before, err := readlink("/proc/self/ns/user")
	if err != nil {
		t.Skipf("no /proc/self/ns/user: %v", err)
	}
	if seccompMode(t) != "0" {
		t.Skip("this test process runs under a seccomp filter; the kernel's own answers cannot be seen")
	}
	want := map[string]syscall.Errno{"unshare": syscall.EINVAL, "clone": syscall.EINVAL, "clone3": syscall.EINVAL, "setns": syscall.EBADF}
	got := Try()
	if len(got) != len(want) {
		t.Fatalf("Try() = %v", got)
	}
	for _, a := range got {
		if a.Errno != want[a.Name] {
			t.Errorf("%s: errno %d (%v), want %d (%v)", a.Name, a.Errno, a.Errno, want[a.Name], want[a.Name])
		}
	}
	if after, _ := readlink("/proc/self/ns/user"); after != before {
		t.Errorf("user namespace changed from %s to %s", before, after)
	}
	var b strings.Builder
	if Report(&b) != 0 || b.String() != "unshare 22\nclone 22\nclone3 22\nsetns 9\n" {
		t.Errorf("Report = %q", b.String())
	}
}

func readlink(p string) (string, error) {
	buf := make([]byte, 128)
	n, err := syscall.Readlink(p, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

func seccompMode(t *testing.T) string {
	t.Helper()
	b, err := readFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	for _, l := range strings.Split(b, "\n") {
		if v, ok := strings.CutPrefix(l, "Seccomp:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func readFile(p string) (string, error) {
	b, err := os.ReadFile(p)
	return string(b), err
}
