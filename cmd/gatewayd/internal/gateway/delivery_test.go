package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	fake "wntrmute.dev/boxmaker/checks/fake/mattermost"
)

// TestAnswerEndedWhileDownPostedOnce: a turn of a thread gatewayd
// started that ends while it is stopped is posted in the thread, marked
// with its turn, when it starts again, and not at the start after that.
func TestAnswerEndedWhileDownPostedOnce(t *testing.T) {
	r := newRig(t, nil)
	root := r.post(t, r.owner, r.dm, "", "hello")
	session := SessionPrefix + root.ID
	r.waitLog(t, "the first answer", func() bool { return len(r.botPosts(root.ID)) == 1 })
	if p := r.botPosts(root.ID)[0]; p.Props[PropTurn] != turnProp(session, 1, 1, 1) {
		t.Fatalf("the live answer's props = %v, want %s %s", p.Props, PropTurn, turnProp(session, 1, 1, 1))
	}
	r.stop()
	r.loop.finish(session, "the late answer")
	r.start(t)
	r.waitLog(t, "the late answer", func() bool { return len(r.botPosts(root.ID)) == 2 })
	late := r.botPosts(root.ID)[1]
	if !strings.Contains(late.Message, "the late answer") || late.Props[PropTurn] != turnProp(session, 2, 1, 1) {
		t.Fatalf("late post = %q, props %v", late.Message, late.Props)
	}
	if got := r.g.delivery.list(); len(got) != 1 || got[0].Turn != 2 {
		t.Fatalf("delivery record = %+v, want %s at turn 2", got, session)
	}
	r.stop()
	r.start(t)
	time.Sleep(300 * time.Millisecond)
	if n := len(r.botPosts(root.ID)); n != 2 {
		t.Errorf("after a second restart the thread has %d bot posts, want 2", n)
	}
	if n := len(r.loop.sent()); n != 1 {
		t.Errorf("loopd got %d messages, want 1", n)
	}
}

// TestCrashBetweenPostAndMark: the thread already holds the late
// answer's post (a crash after posting it, before marking it): a start
// only advances the mark.
func TestCrashBetweenPostAndMark(t *testing.T) {
	r := newRig(t, nil)
	root := r.post(t, r.owner, r.dm, "", "hello")
	session := SessionPrefix + root.ID
	r.waitLog(t, "the first answer", func() bool { return len(r.botPosts(root.ID)) == 1 })
	r.stop()
	n := r.loop.finish(session, "the late answer")
	if _, err := r.mm.PostAs(r.bot.ID, fake.Post{ChannelID: r.dm, RootID: root.ID, Message: "the late answer",
		Props: map[string]any{PropTurn: turnProp(session, n, 1, 1)}}); err != nil {
		t.Fatal(err)
	}
	r.start(t)
	r.waitLog(t, "the mark advanced", func() bool { l := r.g.delivery.list(); return len(l) == 1 && l[0].Turn == n })
	if got := len(r.botPosts(root.ID)); got != 2 {
		t.Fatalf("the thread has %d bot posts, want 2 (no second copy)", got)
	}
}

// TestDeliveryRecord: written atomically and read back; refused when not
// strictly a record gatewayd wrote or writable by others.
func TestDeliveryRecord(t *testing.T) {
	dir := t.TempDir()
	d, err := openDelivery(dir)
	if err != nil || len(d.list()) != 0 {
		t.Fatalf("a first start: %v, %v", err, d.list())
	}
	root := strings.Repeat("a", 26)
	ch := strings.Repeat("c", 26)
	if err := d.known(ch, root); err != nil {
		t.Fatal(err)
	}
	if err := d.mark(SessionPrefix+root, 3); err != nil {
		t.Fatal(err)
	}
	if err := d.mark(SessionPrefix+root, 2); err != nil { // never backwards
		t.Fatal(err)
	}
	again, err := openDelivery(dir)
	if err != nil {
		t.Fatal(err)
	}
	if l := again.list(); len(l) != 1 || l[0] != (delivered{Session: SessionPrefix + root, Channel: ch, Root: root, Turn: 3}) {
		t.Fatalf("reopened = %+v", l)
	}
	files, _ := filepath.Glob(filepath.Join(dir, ".*"))
	if len(files) != 0 {
		t.Errorf("temporary files left: %v", files)
	}
	path := filepath.Join(dir, "delivered.json")
	b, _ := os.ReadFile(path)
	for name, body := range map[string]string{
		"unknown field": strings.Replace(string(b), `"turn":3`, `"turn":3,"extra":1`, 1),
		"wrong session": strings.Replace(string(b), `"session":"mm-a`, `"session":"mm-b`, 1),
		"negative turn": strings.Replace(string(b), `"turn":3`, `"turn":-1`, 1),
		"not json":      "{",
	} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := openDelivery(dir); err == nil || !strings.Contains(err.Error(), "gateway-delivered") {
			t.Errorf("%s: openDelivery = %v, want a refusal naming gateway-delivered", name, err)
		}
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o622); err != nil {
		t.Fatal(err)
	}
	if _, err := openDelivery(dir); err == nil || !strings.Contains(err.Error(), "gateway-delivered") {
		t.Errorf("a file others may write: openDelivery = %v, want a refusal", err)
	}
	os.Remove(path)
	if err := os.Symlink(filepath.Join(t.TempDir(), "x"), path); err != nil {
		t.Fatal(err)
	}
	if _, err := openDelivery(dir); err == nil {
		t.Error("a symbolic link was read")
	}
}
