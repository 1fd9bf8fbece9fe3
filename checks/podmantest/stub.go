package podmantest

import (
	"archive/tar"
	"bytes"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	stubMu  sync.Mutex
	stubIDs = map[*Service]string{}
)

// stubProbe is the stub toolkit's answer to brokerd's namespace probe
// (toolkit probe-namespaces): a shell script cannot make raw system
// calls, so it tries unshare for real (busybox unshare -r) and answers
// the other three as the real toolkit does under brokerd's profile. The
// namespace refusals themselves are tested with the real tool image
// (runner.TestCheckProbesIsolation, TestEscapesContained).
const stubProbe = `[ "$1" = probe-namespaces ] && { if /bin/busybox unshare -r /bin/busybox true 2>/dev/null; then echo "unshare 0"; else echo "unshare 1"; fi; ` +
	`echo "clone 1"; echo "clone3 38"; echo "setns 1"; exit 0; }` + "\n"

// StubImage imports, once per service, a busybox image whose
// /bin/toolkit is a shell script: it prints its argument, its uid and its
// stdin, and diag on stderr, and exits 3; as `shell` it first sleeps for
// a minute. It is for tests of the container lifecycle itself (creation,
// limits, removal, crashes), which need no real tool and no Go build.
func (svc *Service) StubImage(t testing.TB) string {
	t.Helper()
	stubMu.Lock()
	defer stubMu.Unlock()
	if id, ok := stubIDs[svc]; ok {
		return id
	}
	id, err := func() (string, error) {
		bb, err := os.ReadFile("/bin/busybox")
		if err != nil {
			return "", err
		}
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		dir := func(name string, mode int64) {
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode})
		}
		file := func(name string, mode int64, body []byte) {
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body))})
			tw.Write(body)
		}
		for _, d := range []string{"bin/", "etc/", "tmp/", "run/", "work/"} {
			dir(d, 0o755)
		}
		file("bin/busybox", 0o755, bb)
		for _, a := range []string{"sh", "cat", "id", "echo", "sleep", "yes", "head", "dd", "ls"} {
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox"})
		}
		file("bin/toolkit", 0o755, []byte("#!/bin/sh\n"+stubProbe+"in=$(cat)\n[ \"$1\" = shell ] && sleep 60\necho \"tool=$1 uid=$(id -u)\"\necho \"$in\"\necho diag >&2\nexit 3\n"))
		file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n"))
		file("etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n"))
		tw.Close()
		return svc.Import(b.Bytes(), "localhost/boxmaker-stub:test")
	}()
	require.NoError(t, err)
	stubIDs[svc] = id
	return id
}
