package fleet

import (
	"path/filepath"
	"testing"
	"time"
)

// TestOutboxForget: the forgotten message leaves the outbox and is never
// filed again; its session's other messages, and later ones, move to the
// new Honcho session, unsent; the old session's deletion is queued once.
func TestOutboxForget(t *testing.T) {
	o, err := OpenOutbox(filepath.Join(t.TempDir(), "fleet.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	now := time.Now()
	item := func(id, session string) Item {
		return Item{ID: id, Workspace: "w1", Session: session, Peer: "owner", Content: id, Metadata: map[string]string{"boxmaker_id": id}}
	}
	if err := o.File("turn/s1/0/1", Trusted, "clean", []Item{item("s1-e0-r1", "s1"), item("s1-e0-r2", "s1")}, now); err != nil {
		t.Fatal(err)
	}
	if err := o.File("turn/s2/0/1", Trusted, "clean", []Item{item("s2-e0-r1", "s2")}, now); err != nil {
		t.Fatal(err)
	}
	o.Sent([]string{"s1-e0-r1", "s1-e0-r2", "s2-e0-r1"})
	f, err := o.Forget("s1-e0-r1", "n3")
	if err != nil || !f.Filed || f.Workspace != "w1" || f.Old != "s1" || f.New != "s1--after-n3" || f.Moved != 1 {
		t.Fatalf("Forget = %+v, %v", f, err)
	}
	due, err := o.Due(now, 100)
	if err != nil || len(due) != 1 || due[0].ID != "s1-e0-r2" || due[0].Session != "s1--after-n3" || due[0].Lookup || due[0].Attempts != 0 {
		t.Fatalf("due after forget = %+v, %v", due, err)
	}
	// A later filing of the session goes to the new name, without the
	// forgotten message.
	if err := o.File("turn/s1/0/2", Trusted, "clean", []Item{item("s1-e0-r1", "s1"), item("s1-e0-r4", "s1")}, now); err != nil {
		t.Fatal(err)
	}
	var ids []string
	rows, _ := o.db.Query(`SELECT id, hsession FROM outbox WHERE sent = 0 ORDER BY seq`)
	for rows.Next() {
		var id, hs string
		rows.Scan(&id, &hs)
		ids = append(ids, id+"@"+hs)
	}
	rows.Close()
	if len(ids) != 2 || ids[0] != "s1-e0-r2@s1--after-n3" || ids[1] != "s1-e0-r4@s1--after-n3" {
		t.Errorf("unsent = %q", ids)
	}
	// A second forget in the moved session names the first session.
	if f, err := o.Forget("s1-e0-r2", "n5"); err != nil || f.Old != "s1--after-n3" || f.New != "s1--after-n5" {
		t.Errorf("second Forget = %+v, %v", f, err)
	}
	var dels int
	o.db.QueryRow(`SELECT count(*) FROM deletions WHERE done = 0`).Scan(&dels)
	if dels != 2 {
		t.Errorf("%d deletions queued, want 2 (s1, then s1--after-n3)", dels)
	}
	if f, err := o.Forget("never-filed", "n6"); err != nil || f.Filed {
		t.Errorf("Forget of an id never filed = %+v, %v", f, err)
	}
}
