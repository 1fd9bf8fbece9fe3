package pending

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// timers is a fake AfterFunc: timers fire only when the test says.
type timers struct {
	mu sync.Mutex
	fs map[int]*timer
	n  int
}

type timer struct {
	f       func()
	stopped bool
}

func (ts *timers) AfterFunc(d time.Duration, f func()) func() bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.fs == nil {
		ts.fs = map[int]*timer{}
	}
	tm := &timer{f: f}
	ts.n++
	ts.fs[ts.n] = tm
	return func() bool {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		was := !tm.stopped
		tm.stopped = true
		return was
	}
}

// fire runs timer i (1-based, in order of creation) as the runtime would:
// even a stopped timer's function may already be running, so it runs
// regardless; the table must cope.
func (ts *timers) fire(i int) {
	ts.mu.Lock()
	tm := ts.fs[i]
	ts.mu.Unlock()
	tm.f()
}

var t0 = time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)

func newTable(t *testing.T, ttl time.Duration) (*Table, *timers) {
	t.Helper()
	ts := &timers{}
	tb, err := New(ttl, Options{Now: func() time.Time { return t0 }, AfterFunc: ts.AfterFunc})
	if err != nil {
		t.Fatal(err)
	}
	return tb, ts
}

func entry(id int64) Entry {
	return Entry{ID: id, Session: "s", Tool: "read_file", Arguments: json.RawMessage(fmt.Sprintf(`{"path":"/f%d"}`, id))}
}

// codeOf is entry id's code, as the owner's approval post shows it.
func codeOf(t *testing.T, tb *Table, id int64) string {
	t.Helper()
	e, err := tb.Get(id)
	if err != nil {
		t.Fatalf("Get(%d): %v", id, err)
	}
	return e.Code
}

func add(t *testing.T, tb *Table, id int64) <-chan Answer {
	t.Helper()
	_, ch, err := tb.Add(entry(id))
	if err != nil {
		t.Fatalf("Add(%d): %v", id, err)
	}
	return ch
}

func TestTTL(t *testing.T) {
	tests := []struct {
		ttl time.Duration
		ok  bool
	}{
		{0, false},
		{-time.Second, false},
		{MaxTTL + time.Nanosecond, false},
		{48 * time.Hour, false},
		{time.Nanosecond, true},
		{time.Hour, true},
		{MaxTTL, true},
	}
	for _, tt := range tests {
		if _, err := New(tt.ttl, Options{}); (err == nil) != tt.ok {
			t.Errorf("New(%v) = %v, want ok %v", tt.ttl, err, tt.ok)
		}
	}
}

func TestExpiry(t *testing.T) {
	tb, ts := newTable(t, time.Hour)
	e, ch, err := tb.Add(entry(5))
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(time.Hour); !e.Expires.Equal(want) {
		t.Errorf("Expires = %v, want %v", e.Expires, want)
	}
	if len(ch) != 0 {
		t.Fatal("answered before anything removed the entry")
	}
	ts.fire(1)
	if a := <-ch; a.Kind != Expired {
		t.Errorf("answer = %v, want expired", a.Kind)
	}
	if _, err := tb.ApproveBy(5, "", "owner"); !errors.Is(err, ErrNotPending) {
		t.Errorf("Approve after expiry = %v, want ErrNotPending", err)
	}
	if n := len(tb.List()); n != 0 {
		t.Errorf("List after expiry has %d entries", n)
	}
}

func TestExpiryRealTimer(t *testing.T) {
	tb, err := New(10*time.Millisecond, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ch := add(t, tb, 1)
	select {
	case a := <-ch:
		if a.Kind != Expired {
			t.Errorf("answer = %v, want expired", a.Kind)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer 5 s after a 10 ms ttl")
	}
}

// TestExactlyOnce races approve, refuse, withdraw and expiry on each of
// many entries: exactly one remover succeeds, and the entry's channel
// holds exactly its answer.
func TestExactlyOnce(t *testing.T) {
	const n = 200
	tb, ts := newTable(t, time.Hour)
	chans := make([]<-chan Answer, n+1)
	for id := int64(1); id <= n; id++ {
		chans[id] = add(t, tb, id)
	}
	won := make([][]Kind, n+1)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for id := int64(1); id <= n; id++ {
		code := codeOf(t, tb, id)
		racers := map[Kind]func() bool{
			Approved:  func() bool { _, err := tb.ApproveBy(id, code, "owner"); return err == nil },
			Refused:   func() bool { _, err := tb.RefuseBy(id, code, "no", "owner"); return err == nil },
			Withdrawn: func() bool { return tb.Withdraw(id) },
			Expired: func() bool {
				ts.fire(int(id)) // timers were created in id order
				return false     // its win shows only in the answer
			},
		}
		for k, f := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if f() {
					mu.Lock()
					won[id] = append(won[id], k)
					mu.Unlock()
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	for id := int64(1); id <= n; id++ {
		ch := chans[id]
		if len(ch) != 1 {
			t.Fatalf("entry %d: %d answers queued, want exactly 1", id, len(ch))
		}
		a := <-ch
		switch {
		case len(won[id]) > 1:
			t.Errorf("entry %d: removed by %v, more than once", id, won[id])
		case len(won[id]) == 1 && won[id][0] != a.Kind:
			t.Errorf("entry %d: %v removed it but the answer is %v", id, won[id][0], a.Kind)
		case len(won[id]) == 0 && a.Kind != Expired:
			t.Errorf("entry %d: no caller removed it, yet the answer is %v", id, a.Kind)
		}
	}
	if n := len(tb.List()); n != 0 {
		t.Errorf("%d entries left pending", n)
	}
}

func TestListAndGet(t *testing.T) {
	tb, _ := newTable(t, time.Hour)
	for _, id := range []int64{42, 7, 19, 3, 100} {
		add(t, tb, id)
	}
	var ids []int64
	for _, e := range tb.List() {
		ids = append(ids, e.ID)
	}
	if got, want := fmt.Sprint(ids), "[3 7 19 42 100]"; got != want {
		t.Errorf("List ids = %s, want %s", got, want)
	}
	e, err := tb.Get(19)
	if err != nil {
		t.Fatal(err)
	}
	if string(e.Arguments) != `{"path":"/f19"}` || e.Session != "s" || e.Tool != "read_file" {
		t.Errorf("Get(19) = %+v", e)
	}
	e.Arguments[2] = 'X' // a copy: the table must not change
	if again, _ := tb.Get(19); string(again.Arguments) != `{"path":"/f19"}` {
		t.Errorf("Get(19) after changing a copy = %s", again.Arguments)
	}
	tb.Withdraw(19)
	if n := len(tb.List()); n != 4 {
		t.Errorf("List after a withdrawal has %d entries, want 4", n)
	}
}

func TestRefused(t *testing.T) {
	tb, _ := newTable(t, time.Hour)
	ch := add(t, tb, 1)
	tests := []struct {
		name   string
		reason string
		ok     bool
	}{
		{"newline", "no\nreally", false},
		{"escape", "\x1b[8m", false},
		{"line separator", "a\u2028b", false},
		{"too long", strings.Repeat("x", MaxReason+1), false},
		{"fits", "not that file", true},
	}
	code := codeOf(t, tb, 1)
	for _, tt := range tests {
		if _, err := tb.RefuseBy(1, code, tt.reason, "owner"); (err == nil) != tt.ok {
			t.Errorf("Refuse(1, %s) = %v, want ok %v", tt.name, err, tt.ok)
		}
		if !tt.ok && len(ch) != 0 {
			t.Fatalf("Refuse(1, %s) was refused but answered the entry", tt.name)
		}
	}
	if a := <-ch; a.Kind != Refused || a.Reason != "not that file" {
		t.Errorf("answer = %+v, want refused with the reason", a)
	}
}

func TestUnknownAndInvalid(t *testing.T) {
	tb, _ := newTable(t, time.Hour)
	add(t, tb, 1)
	calls := []struct {
		name string
		err  error
	}{
		{"ApproveBy", func() error { _, err := tb.ApproveBy(9, "", "owner"); return err }()},
		{"RefuseBy", func() error { _, err := tb.RefuseBy(9, "", "", "owner"); return err }()},
		{"Get", func() error { _, err := tb.Get(9); return err }()},
	}
	for _, c := range calls {
		if !errors.Is(c.err, ErrNotPending) {
			t.Errorf("%s(9) = %v, want ErrNotPending", c.name, c.err)
		}
	}
	if tb.Withdraw(9) {
		t.Error("Withdraw(9) = true for an id never added")
	}
	bad := []Entry{entry(1), entry(0), entry(-3), {ID: 2, Arguments: json.RawMessage(`{`)}}
	for _, e := range bad {
		if _, _, err := tb.Add(e); err == nil {
			t.Errorf("Add(%+v) = nil error", e)
		}
	}
	if n := len(tb.List()); n != 1 {
		t.Errorf("List has %d entries after refused adds, want 1", n)
	}
}

// TestOwnerAnswerNeedsTheCode: an owner's answer with the id alone, or
// with another code, answers nothing and the entry stays pending; the
// entry's own code (in any case) answers it. Codes differ per entry.
func TestOwnerAnswerNeedsTheCode(t *testing.T) {
	tb, _ := newTable(t, time.Hour)
	seen := map[string]bool{}
	for id := int64(1); id <= 50; id++ {
		add(t, tb, id)
		e, err := tb.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		if c, err := wire.ParseApprovalCode(e.Code); err != nil || c != e.Code {
			t.Fatalf("entry %d's code %q is not canonical: %v", id, e.Code, err)
		}
		seen[e.Code] = true
	}
	if len(seen) < 49 {
		t.Errorf("50 entries drew %d distinct codes", len(seen))
	}
	e, _ := tb.Get(7)
	wrong := "000000"
	if e.Code == wrong {
		wrong = "000001"
	}
	for _, code := range []string{"", wrong, "\x00any", e.Code + "0"} {
		if _, err := tb.ApproveBy(7, code, "owner"); !errors.Is(err, ErrWrongCode) {
			t.Errorf("ApproveBy(7, %q) = %v, want ErrWrongCode", code, err)
		}
		if _, err := tb.RefuseBy(7, code, "no", "owner"); !errors.Is(err, ErrWrongCode) {
			t.Errorf("RefuseBy(7, %q) = %v, want ErrWrongCode", code, err)
		}
	}
	if _, err := tb.Get(7); err != nil {
		t.Fatalf("after wrong codes: %v, want still pending", err)
	}
	if _, err := tb.ApproveBy(7, strings.ToUpper(e.Code), "owner"); err != nil {
		t.Errorf("ApproveBy with the code: %v", err)
	}
}
