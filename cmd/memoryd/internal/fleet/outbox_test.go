package fleet

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	fake "wntrmute.dev/boxmaker/checks/fake/honcho"
	"wntrmute.dev/boxmaker/cmd/memoryd/internal/honcho"
	"wntrmute.dev/boxmaker/pkg/dataclass"
	"wntrmute.dev/boxmaker/pkg/secret"
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
