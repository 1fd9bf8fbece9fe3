package procinfo

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/daemon"
)

// TestPeerVersion: the listener at the other end of a connection is this
// process, whose version read from /proc is the one it reads of itself;
// a process that is not there is "unknown".
func TestPeerVersion(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pid := PeerPID(c.(*net.UnixConn))
	if pid != os.Getpid() {
		t.Errorf("PeerPID = %d, want %d", pid, os.Getpid())
	}
	if got, want := VersionOf(pid), daemon.Version(); got != want {
		t.Errorf("VersionOf(self) = %q, want %q", got, want)
	}
	for _, pid := range []int{0, 1 << 30} {
		if got := VersionOf(pid); got != "unknown" {
			t.Errorf("VersionOf(%d) = %q", pid, got)
		}
	}
}
