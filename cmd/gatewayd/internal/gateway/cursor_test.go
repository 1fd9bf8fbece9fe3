package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPostsWhileStoppedAnsweredOnce: posts sent while gatewayd is
// stopped (a new thread and a reply in an old one) are fetched when it
// starts again and answered once each; a post answered before the stop
// is not answered again; a second restart answers nothing more.
func TestPostsWhileStoppedAnsweredOnce(t *testing.T) {
	r := newRig(t, nil)
	before := r.post(t, r.owner, r.dm, "", "before the stop")
	waitFor(t, "the first answer", func() bool { return len(r.botPosts(before.ID)) == 1 })
	r.stop()
	time.Sleep(10 * time.Millisecond)
	fresh := r.post(t, r.owner, r.dm, "", "sent while stopped")
	reply := r.post(t, r.owner, r.dm, before.ID, "a reply while stopped")
	r.start(t)
	waitFor(t, "the missed posts answered", func() bool {
		return len(r.botPosts(fresh.ID)) == 1 && len(r.botPosts(before.ID)) == 2
	})
	r.stop()
	r.start(t)
	time.Sleep(500 * time.Millisecond)
	if n := len(r.botPosts(fresh.ID)); n != 1 {
		t.Errorf("the post sent while stopped has %d answers, want 1", n)
	}
	if n := len(r.botPosts(before.ID)); n != 2 {
		t.Errorf("the old thread has %d answers, want 2 (its first post and %s)", n, reply.ID)
	}
	if got := r.loop.sent(); len(got) != 3 {
		t.Errorf("loopd got %d messages, want 3: %v", len(got), got)
	}
}

// TestCursorRefusedWhenNotOurs: a cursor file gatewayd did not write
// stops it at start with the runbook's anchor, rather than answering
// from a wrong place.
func TestCursorRefusedWhenNotOurs(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cursor.json"), []byte(`{"since":1,"handled":[],"extra":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openCursor(dir); err == nil || !strings.Contains(err.Error(), "gateway-cursor") {
		t.Fatalf("openCursor = %v, want a refusal naming gateway-cursor", err)
	}
	// A well-formed cursor others could have written is not believed.
	loose := t.TempDir()
	p := filepath.Join(loose, "cursor.json")
	if err := os.WriteFile(p, []byte(`{"since":1,"handled":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o622); err != nil {
		t.Fatal(err)
	}
	if _, err := openCursor(loose); err == nil || !strings.Contains(err.Error(), "writable only by it") {
		t.Fatalf("openCursor of a 0622 cursor = %v, want a refusal", err)
	}
	c, err := openCursor(t.TempDir())
	if err != nil || c.since() != 0 {
		t.Fatalf("a first start: %v, since %d", err, c.since())
	}
	if err := c.mark("p1", 42); err != nil {
		t.Fatal(err)
	}
	again, err := openCursor(filepath.Dir(c.path))
	if err != nil || again.since() != 42 || !again.handled("p1") {
		t.Fatalf("reopened: %v, since %d", err, again.since())
	}
}
