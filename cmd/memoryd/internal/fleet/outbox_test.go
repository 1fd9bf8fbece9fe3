package fleet

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	fake "wntrmute.dev/boxmaker/checks/fake/honcho"
	"wntrmute.dev/boxmaker/cmd/memoryd/internal/honcho"
	"wntrmute.dev/boxmaker/pkg/host/secret"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// someTurns writes n sessions of one turn each and files them.
func someTurns(t *testing.T, r *rig, prefix string, n int) []string {
	t.Helper()
	var want []string
	for i := range n {
		id := fmt.Sprintf("%s%d", prefix, i)
		said, reply := fmt.Sprintf("%s-user-%d", prefix, i), fmt.Sprintf("%s-reply-%d", prefix, i)
		writeLog(t, r.sessions, id, turnSpec{said: said, reply: reply})
		if _, err := r.fleet.TurnEnded(context.Background(), id, 0); err != nil {
			t.Fatal(err)
		}
		want = append(want, said, reply)
	}
	return want
}

// once fails unless Honcho holds each of want exactly once.
func once(t *testing.T, srv *fake.Server, want []string) {
	t.Helper()
	count := map[string]int{}
	for _, m := range srv.Messages() {
		count[m.Content]++
	}
	for _, w := range want {
		if count[w] != 1 {
			t.Errorf("Honcho holds %q %d times, want once", w, count[w])
		}
	}
	if len(srv.Messages()) != len(want) {
		t.Errorf("Honcho holds %d messages, want %d", len(srv.Messages()), len(want))
	}
}

func TestOutboxHonchoDown(t *testing.T) {
	r := newRig(t, brokerSays(clean))
	r.honcho.SetFailure(http.StatusServiceUnavailable)
	want := someTurns(t, r, "down", 5)
	for range 5 {
		if _, err := r.fleet.SendOnce(context.Background()); err == nil {
			t.Fatal("a send to a Honcho that answers 503 succeeded")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if s, _ := r.fleet.Status(); s.Pending != 10 || s.LastError == "" {
		t.Errorf("status while Honcho is down = %+v, want 10 pending with an error", s)
	}
	r.honcho.SetFailure(0)
	time.Sleep(2 * time.Millisecond)
	r.drain()
	once(t, r.honcho, want)
}

// TestOutboxKilledMidSend: memoryd stops while a batch is in flight
// (Honcho slow, the request abandoned); a new memoryd over the same
// outbox sends it, once.
func TestOutboxKilledMidSend(t *testing.T) {
	r := newRig(t, brokerSays(clean))
	want := someTurns(t, r, "kill", 2)
	r.honcho.SetDelay(time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	testOnlyBeforeSend = func() { time.AfterFunc(50*time.Millisecond, cancel) }
	t.Cleanup(func() { testOnlyBeforeSend = nil })
	if _, err := r.fleet.SendOnce(ctx); err == nil {
		t.Fatal("the abandoned send succeeded")
	}
	testOnlyBeforeSend = nil
	r.fleet.Close()
	r.honcho.SetDelay(0)
	r.open()
	time.Sleep(2 * time.Millisecond)
	r.drain()
	once(t, r.honcho, want)
}

// lossy forwards every request to Honcho and, while drop is set, drops
// the answer of each message batch after Honcho applied it.
func lossy(t *testing.T, target string, drop *atomic.Bool) string {
	u, _ := url.Parse(target)
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !drop.Load() || req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/messages") {
			proxy.ServeHTTP(w, req)
			return
		}
		rec := httptest.NewRecorder()
		proxy.ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated {
			t.Errorf("Honcho answered %d through the lossy proxy", rec.Code)
		}
		panic(http.ErrAbortHandler) // the answer is lost on the way back
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestOutboxAnswersLost(t *testing.T) {
	r := newRig(t, brokerSays(clean))
	var drop atomic.Bool
	drop.Store(true)
	r.settings = settings(t, lossy(t, r.honcho.URL, &drop))
	c, err := honcho.New(r.settings, secret.Value{})
	if err != nil {
		t.Fatal(err)
	}
	r.client = c
	r.fleet.Close()
	r.open()
	want := someTurns(t, r, "lost", 3)
	// Each session's batch: the first send is applied and its answer
	// lost; the retry finds the messages in Honcho by their ids and
	// sends nothing again (the answers are still being dropped).
	for i := range 3 {
		if _, err := r.fleet.SendOnce(context.Background()); err == nil {
			t.Fatalf("batch %d: a send whose answer was lost succeeded", i)
		}
		time.Sleep(2 * time.Millisecond)
		if n, err := r.fleet.SendOnce(context.Background()); err != nil || n != 2 {
			t.Fatalf("batch %d: the retry = %d, %v; want the 2 messages found in Honcho", i, n, err)
		}
	}
	if n := len(r.honcho.Messages()); n != 6 {
		t.Fatalf("Honcho applied %d messages, want 6", n)
	}
	drop.Store(false)
	r.drain()
	once(t, r.honcho, want)
}

// TestResyncIntoEmptyHoncho: after the outbox is drained into one Honcho,
// bxctl memory resync into an empty one reproduces the same content;
// into the same one, it adds nothing.
func TestResyncIntoEmptyHoncho(t *testing.T) {
	r := newRig(t, brokerSays(clean))
	someTurns(t, r, "sync", 3)
	writeLog(t, r.sessions, "bad1", turnSpec{said: "sync-untrusted-user", tool: "page", untrusted: true, reply: "sync-untrusted-reply"})
	r.fleet.TurnEnded(context.Background(), "bad1", 0)
	r.fleet.Notes([]Moved{{Note: "n1", Text: "sync-moved-entry", Class: dataclass.Private}})
	r.drain()
	first := r.honcho.Messages()
	if len(first) != 9 {
		t.Fatalf("Honcho holds %d messages, want 9", len(first))
	}
	if _, err := r.fleet.Resync(); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if n := len(r.honcho.Messages()); n != 9 {
		t.Errorf("a resync into the same Honcho left %d messages, want 9", n)
	}

	empty := fake.New(t, fake.Options{})
	r.settings = settings(t, empty.URL)
	r.client, _ = honcho.New(r.settings, secret.Value{})
	r.fleet.Close()
	r.open()
	if _, err := r.fleet.Resync(); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if got, want := stored(empty.Messages()), stored(first); !slices.Equal(got, want) {
		t.Errorf("resync into an empty Honcho:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func stored(ms []fake.StoredMessage) []string {
	var out []string
	for _, m := range ms {
		out = append(out, fmt.Sprintf("%s %s %s %q %s", m.Workspace, m.Session, m.Peer, m.Content, m.Metadata))
	}
	slices.Sort(out)
	return out
}

// rebuild deletes the outbox, as the runbooks memoryd-unavailable and
// fleet-outbox tell the owner to, and opens a new one: memoryd restarted.
func (r *rig) rebuild() {
	r.t.Helper()
	r.fleet.Close()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(r.db + suffix); err != nil && !os.IsNotExist(err) {
			r.t.Fatal(err)
		}
	}
	r.open()
}

// TestOutboxRebuiltSendsNothingTwice (review finding 8): Honcho holds
// every message; the outbox is deleted and memoryd restarted. Its
// catch-up files every turn and note again, and a turn ending before the
// catch-up reached its session files that session's earlier turns too:
// Honcho still holds each message exactly once. After a complete
// catch-up, new messages are sent without a lookup.
func TestOutboxRebuiltSendsNothingTwice(t *testing.T) {
	r := newRig(t, brokerSays(clean))
	want := someTurns(t, r, "re", 3)
	moved := []Moved{{Note: "n1", Text: "re-moved-entry", Class: dataclass.Private}}
	if err := r.fleet.Notes(moved); err != nil {
		t.Fatal(err)
	}
	want = append(want, "re-moved-entry")
	r.drain()
	once(t, r.honcho, want)
	if rebuilt, _ := r.fleet.outbox.Rebuilt(); !rebuilt {
		t.Fatal("a new outbox is not marked rebuilt before its first catch-up")
	}

	r.rebuild()
	// A live turn of re0 ends first: re0's log now has two turns, the
	// first of which Honcho holds.
	writeLog(t, r.sessions, "re0", turnSpec{said: "re-user-0", reply: "re-reply-0"}, turnSpec{said: "re-user-0b", reply: "re-reply-0b"})
	want = append(want, "re-user-0b", "re-reply-0b")
	if _, err := r.fleet.TurnEnded(context.Background(), "re0", 0); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if err := r.fleet.Notes(moved); err != nil {
		t.Fatal(err)
	}
	var logs []string
	for i := range 3 {
		logs = append(logs, filepath.Join(r.sessions, fmt.Sprintf("re%d", i), "0.jsonl"))
	}
	if n, err := r.fleet.CatchUp(context.Background(), logs); n != 0 || err != nil {
		t.Fatalf("CatchUp = %d, %v", n, err)
	}
	r.drain()
	once(t, r.honcho, want)
	if rebuilt, _ := r.fleet.outbox.Rebuilt(); rebuilt {
		t.Error("a complete catch-up left the outbox rebuilt")
	}

	// Caught up: a new turn is filed with no lookup.
	writeLog(t, r.sessions, "re9", turnSpec{said: "re-user-9", reply: "re-reply-9"})
	if _, err := r.fleet.TurnEnded(context.Background(), "re9", 0); err != nil {
		t.Fatal(err)
	}
	items, err := r.fleet.outbox.Due(time.Now(), 10)
	if err != nil || len(items) != 2 || items[0].Lookup || items[0].Attempts != 0 {
		t.Errorf("a caught-up outbox's new items = %+v, %v; want 2 with no lookup", items, err)
	}
}

// TestOutboxRebuiltLooksOverTheWholeSession: a message of a rebuilt
// outbox is looked for beyond the newest lookPages pages (it may have
// been sent long ago): with the bound lowered to one page, a session of
// several pages is still not sent twice.
func TestOutboxRebuiltLooksOverTheWholeSession(t *testing.T) {
	old := lookPages
	lookPages = 1
	t.Cleanup(func() { lookPages = old })
	r := newRig(t, brokerSays(clean))
	var turns []turnSpec
	var want []string
	for i := range 120 { // 240 messages: three pages of 100
		s, rep := fmt.Sprintf("long-user-%d", i), fmt.Sprintf("long-reply-%d", i)
		turns = append(turns, turnSpec{said: s, reply: rep})
		want = append(want, s, rep)
	}
	writeLog(t, r.sessions, "long", turns...)
	if _, err := r.fleet.TurnEnded(context.Background(), "long", 0); err != nil {
		t.Fatal(err)
	}
	r.drain()
	once(t, r.honcho, want)
	r.rebuild()
	if n, err := r.fleet.CatchUp(context.Background(), []string{filepath.Join(r.sessions, "long", "0.jsonl")}); n != 0 || err != nil {
		t.Fatalf("CatchUp = %d, %v", n, err)
	}
	r.drain()
	once(t, r.honcho, want)
}

// TestOutboxMigratesLookup: an outbox made before the lookup column
// opens, gains it, and is not marked rebuilt (it is not new).
func TestOutboxMigratesLookup(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fleet.db")
	db, err := sql.Open("sqlite", "file:"+p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE filed(key TEXT PRIMARY KEY, filing TEXT NOT NULL, reason TEXT NOT NULL, at TEXT NOT NULL);
CREATE TABLE outbox(seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, workspace TEXT NOT NULL,
	hsession TEXT NOT NULL, peer TEXT NOT NULL, content TEXT NOT NULL, metadata TEXT NOT NULL,
	sent INTEGER NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0, next_at INTEGER NOT NULL DEFAULT 0, last_error TEXT NOT NULL DEFAULT '');
INSERT INTO outbox(id, workspace, hsession, peer, content, metadata) VALUES('s-e0-r1', 'w', 's', 'p', 'x', '{}');`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	o, err := OpenOutbox(p)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if rebuilt, err := o.Rebuilt(); rebuilt || err != nil {
		t.Errorf("an existing outbox: rebuilt %v, %v", rebuilt, err)
	}
	items, err := o.Due(time.Now(), 10)
	if err != nil || len(items) != 1 || items[0].Lookup {
		t.Errorf("the old outbox's item = %+v, %v", items, err)
	}
}
