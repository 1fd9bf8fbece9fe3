package stack

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	honchofake "wntrmute.dev/boxmaker/checks/fake/honcho"
	fake "wntrmute.dev/boxmaker/checks/fake/llama"
)

// lossyHoncho forwards to the fake Honcho and, while drop is set, drops
// the answer of every message batch after Honcho applied it.
func lossyHoncho(t *testing.T, target string, drop *atomic.Bool) string {
	t.Helper()
	u, _ := url.Parse(target)
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ErrorLog = log.New(io.Discard, "", 0) // memoryd killed mid-request is expected here
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !drop.Load() || req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/messages") {
			proxy.ServeHTTP(w, req)
			return
		}
		proxy.ServeHTTP(httptest.NewRecorder(), req)
		panic(http.ErrAbortHandler)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func waitMemory(t *testing.T, bin, state, want string, d time.Duration) string {
	t.Helper()
	var out string
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		out, _ = bxctl(t, bin, "memory", "--state", state)
		if strings.Contains(out, want) {
			return out
		}
	}
	t.Fatalf("bxctl memory never said %q:\n%s", want, out)
	return ""
}

func contents(ms []honchofake.StoredMessage) []string {
	var out []string
	for _, m := range ms {
		out = append(out, fmt.Sprintf("%s %s %s %q %s", m.Workspace, m.Session, m.Peer, m.Content, m.Metadata))
	}
	slices.Sort(out)
	return out
}

func onceEach(t *testing.T, hon *honchofake.Server, want []string) {
	t.Helper()
	n := map[string]int{}
	for _, m := range hon.Messages() {
		n[m.Content]++
	}
	for _, w := range want {
		if n[w] != 1 {
			t.Errorf("Honcho holds %q %d times, want once", w, n[w])
		}
	}
	if len(hon.Messages()) != len(want) {
		t.Errorf("Honcho holds %d messages, want %d", len(hon.Messages()), len(want))
	}
}

// TestStackFleetOutbox: Honcho down for a run of turns, then answering
// with its answers lost after it applied each batch, then memoryd killed
// (SIGKILL) while a batch is in flight: afterwards Honcho holds every
// message exactly once. Then `bxctl memory resync` into an empty Honcho
// reproduces the same content.
func TestStackFleetOutbox(t *testing.T) {
	t.Parallel()
	bin, state, srv := stack(t, 65536)
	hon := honchofake.New(t, honchofake.Options{})
	var drop atomic.Bool
	fleetConfigs(t, state, lossyHoncho(t, hon.URL, &drop))
	exited := up(t, bin, state, srv)
	var want []string
	turn := func(session, mark string) {
		srv.Script(fake.Reply{Reasoning: "r", Content: mark + "-REPLY"})
		chat(t, bin, state, session, mark+"-USER")
		want = append(want, mark+"-USER", mark+"-REPLY")
	}

	// 1. Honcho down for a run of turns: everything waits in the outbox.
	hon.SetFailure(http.StatusServiceUnavailable)
	for i := range 3 {
		turn(fmt.Sprintf("down%d", i), fmt.Sprintf("OUT-DOWN%d", i))
	}
	out := waitMemory(t, bin, state, "6 pending", 10*time.Second)
	if !strings.Contains(out, "last error:") || len(hon.Messages()) != 0 {
		t.Errorf("with Honcho down: %s (Honcho holds %d)", out, len(hon.Messages()))
	}

	// 2. Honcho back, but every batch's answer is lost after it applied
	// it: the retries find the messages by id and send nothing twice.
	drop.Store(true)
	hon.SetFailure(0)
	waitMemory(t, bin, state, "0 pending, 6 sent", 90*time.Second)
	onceEach(t, hon, want)

	// 3. memoryd killed while a batch is in flight.
	drop.Store(false)
	hon.SetDelay(time.Minute)
	before := len(hon.Requests())
	srv.Script(fake.Reply{Reasoning: "r", Content: "OUT-KILL-REPLY"})
	chat(t, bin, state, "kill1", "OUT-KILL-USER")
	want = append(want, "OUT-KILL-USER", "OUT-KILL-REPLY")
	for i := 0; ; i++ {
		if i > 500 {
			t.Fatal("memoryd never sent the batch")
		}
		sent := false
		for _, r := range hon.Requests()[before:] {
			sent = sent || strings.HasSuffix(r.Path, "/sessions/kill1/messages")
		}
		if sent {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	syscall.Kill(pidOf(t, bin+"/memoryd", state), syscall.SIGKILL)
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatal("bxctl up did not stop after memoryd died")
	}
	hon.SetDelay(0)
	selftestReplies(srv)
	exited = up(t, bin, state, srv)
	waitMemory(t, bin, state, "0 pending, 8 sent", 60*time.Second)
	onceEach(t, hon, want)

	// 4. Resync into an empty Honcho reproduces the same content.
	first := contents(hon.Messages())
	empty := honchofake.New(t, honchofake.Options{})
	cfg := filepath.Join(state, "config", "memoryd.toml")
	b, _ := os.ReadFile(cfg)
	text := regexp.MustCompile(`(?m)^url = ".*"$`).ReplaceAllString(string(b), `url = "`+empty.URL+`"`)
	if text == string(b) {
		t.Fatal("memoryd.toml has no url line")
	}
	os.WriteFile(cfg, []byte(text), 0o640)
	stopStack(t, bin, exited)
	selftestReplies(srv)
	up(t, bin, state, srv)
	if out, err := bxctl(t, bin, "memory", "resync", "--state", state); err != nil || !strings.Contains(out, "8 messages queued") {
		t.Fatalf("bxctl memory resync: %v %s", err, out)
	}
	waitMemory(t, bin, state, "0 pending, 8 sent", 60*time.Second)
	if got := contents(empty.Messages()); !slices.Equal(got, first) {
		t.Errorf("after resync into an empty Honcho:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(first, "\n"))
	}
}

// stopStack stops a running bxctl up (SIGTERM) and waits for it.
func stopStack(t *testing.T, bin string, exited <-chan error) {
	t.Helper()
	syscall.Kill(pidOf(t, bin+"/bxctl", "up"), syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatal("bxctl up did not stop")
	}
}
