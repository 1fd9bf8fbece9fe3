package broker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
)

// TestCopyOutFollowsNoLink: post_file's copy is refused when a link lies
// anywhere on the decided path (a directory link planted in a granted
// directory by an earlier call, pointing at brokerd's state), and when
// the path lies in one of brokerd's protected paths even without a link;
// nothing reaches the outbox either way. A plain file is copied whole.
func TestCopyOutFollowsNoLink(t *testing.T) {
	root := t.TempDir()
	granted, state := filepath.Join(root, "scratch"), filepath.Join(root, "state")
	out := filepath.Join(root, "outbox")
	for _, d := range []string{granted, filepath.Join(state, "secrets"), out} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(state, "secrets", "token"), []byte("s3cret"), 0o600)
	os.WriteFile(filepath.Join(granted, "report.txt"), []byte("the report"), 0o600)
	if err := os.Symlink(state, filepath.Join(granted, "d")); err != nil {
		t.Fatal(err)
	}
	path := func(s string) toolargs.Path {
		p, err := toolargs.ParsePath(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	protected := []string{state}
	for _, tt := range []struct{ path, want string }{
		{filepath.Join(granted, "d", "secrets", "token"), "has a link on its path"},
		{filepath.Join(state, "secrets", "token"), "which brokerd keeps to itself"},
	} {
		if _, err := copyOut(path(tt.path), out, protected); err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasSuffix(err.Error(), "see docs/runbook.md#post-file-refused") {
			t.Errorf("copyOut(%s) = %v, want a refusal naming %q", tt.path, err, tt.want)
		}
	}
	if left, _ := os.ReadDir(out); len(left) != 0 {
		t.Errorf("the outbox holds %d files after refusals", len(left))
	}
	pf, err := copyOut(path(filepath.Join(granted, "report.txt")), out, protected)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(out, pf.ID)); string(b) != "the report" {
		t.Errorf("the copy holds %q", b)
	}
}
