package runner

import (
	"os"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/internal/podmantest"
)

func TestLifecycleStub(t *testing.T) {
	svc := podmantest.Require(t)
	p := newRunner(t, svc, svc.StubImage(t), nil)
	dir := t.TempDir()
	os.WriteFile(dir+"/x", []byte("hi"), 0o644)
	d := decide(t, autoGrant("r", "read_file", []string{dir}), "read_file", map[string]string{"path": dir + "/x"})
	out := run(t, p, d)
	t.Logf("%+v", out)
	if !strings.Contains(out.Stdout, "tool=read_file uid=65534") || !strings.Contains(out.Stdout, `{"args":{"path":"`+dir+`/x"}}`) || out.Stderr != "diag\n" || out.Exit != 3 {
		t.Errorf("output = %+v", out)
	}
	if l := leftovers(t, svc, p); len(l) > 0 {
		t.Errorf("containers left behind: %v", l)
	}
}
