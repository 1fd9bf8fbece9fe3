package vm

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/vm/fakes"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/units"
	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// What a role's SIGKILL mid-turn may do to the turn (docs/decisions.md,
// the mid-turn row). In every case the owner's message stays in the log,
// the log only grows, the turn ends once, and exactly one post in the
// thread carries the turn's outcome.
type midTurnWant struct {
	// answered: the outcome is the model's answer; otherwise the turn is
	// stopped as interrupted and the outcome is that stop, its message
	// starting with stop.
	answered bool
	stop     string
	// notice: one "Boxmaker could not answer" post, without a turn mark,
	// comes before the outcome (gatewayd's live connection to loopd broke).
	notice bool
	// call: the turn's recall call was under way in the killed role and
	// is logged with this status, not as run ("" when the turn makes no
	// call): denied when brokerd is gone (loopd's "no tool can run"),
	// error when memoryd did not answer brokerd.
	call wire.ToolStatus
}

var midTurnWants = map[string]midTurnWant{
	layout.Gatewayd:   {answered: true},
	layout.Loopd:      {notice: true, stop: "loopd stopped before this message was answered"},
	layout.Inferproxy: {stop: "the turn failed: model: "},
	layout.Brokerd:    {answered: true, call: wire.StatusDenied},
	layout.Memoryd:    {answered: true, call: wire.StatusFailed},
}

// midTurn is one role's mid-turn kill (see the fakes' midturn.go): the
// owner's message goes in, the turn is held where role takes part, role's
// main process is killed with SIGKILL, its unit starts it again, the turn
// is released, and what the owner and the disk are left with is checked.
func (g guest) midTurn(t *testing.T, role string) {
	unit := units.UnitName(role)
	want := midTurnWants[role]
	g.serving(t) // the previous check's restarts are over
	old := g.mainPID(t, unit)
	if old == 0 {
		t.Fatalf("%s is not running", unit)
	}
	mem := units.UnitName(layout.Memoryd)
	tool := want.call != ""
	g.must(t, "touch /run/bx-fakes/"+fakes.Go(role))
	root := g.fakeFile(t, fakes.Root(role))
	session := "mm-" + root
	logPath := filepath.Join(layout.Sessions.In(units.StateDir), session, "0.jsonl")
	defer func() {
		if t.Failed() {
			journal := func(u string) string {
				return g.sh(t, time.Minute, "journalctl -u "+u+" --no-pager -o short-monotonic | tail -25").Stdout
			}
			t.Logf("the session log:\n%s\nthe fakes:\n%s\n%s:\n%s\nloopd:\n%s\ngatewayd:\n%s", g.sh(t, time.Minute, "cat "+logPath).Stdout,
				g.sh(t, time.Minute, "cd /run/bx-fakes && grep -H . *-"+role+"*; journalctl -u bx-fakes --no-pager -o cat | tail -10").Stdout,
				unit, journal(unit), journal(units.UnitName(layout.Loopd)), journal(units.UnitName(layout.Gatewayd)))
		}
	}()
	// The model's reply is held after HoldAfter tokens: the stream is
	// under way through inferproxy, loopd reads it, gatewayd waits on
	// loopd. For brokerd and memoryd the held reply is the recall call:
	// memoryd is stopped (not killed), then the call released, so it
	// waits in brokerd, sent to memoryd and unanswered.
	g.waitFor(t, fakes.Served(role), "1")
	if tool {
		g.must(t, fmt.Sprintf("kill -STOP %d", g.mainPID(t, mem)))
		defer g.sh(t, time.Minute, fmt.Sprintf("kill -CONT %d", g.mainPID(t, mem)))
		g.must(t, "touch /run/bx-fakes/"+fakes.Release(role))
	}
	time.Sleep(5 * time.Second)
	before := g.fileBytes(t, logPath)
	began := time.Now()
	g.must(t, fmt.Sprintf("kill -9 %d", old))
	pid, err := g.respawned(t, role, old)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: pid %d killed mid-turn, pid %d active after %v", unit, old, pid, time.Since(began).Round(time.Second))
	if tool {
		g.must(t, fmt.Sprintf("kill -CONT %d", g.mainPID(t, mem)))
	} else {
		g.must(t, "touch /run/bx-fakes/"+fakes.Release(role))
	}

	posts := g.outcome(t, role)
	after := g.fileBytes(t, logPath)
	for _, p := range checkMidTurn(want, role, session, before, after, posts) {
		t.Error(p)
	}
	if r := g.sh(t, 2*time.Minute, "/usr/local/bin/bxctl audit verify --anchors /root/audit-anchors "+layout.Audit.In(units.StateDir)); r.Exit != 0 {
		t.Errorf("bxctl audit verify after %s's kill: %s", role, r)
	}
}

// outcome waits for the bot's post that carries the turn's mark, then
// long enough for a second one (gatewayd's sweep runs every 5 s), and
// returns the bot's posts in the thread.
func (g guest) outcome(t *testing.T, role string) []fakes.Post {
	t.Helper()
	var posts []fakes.Post
	read := func() {
		posts = nil
		out := g.sh(t, time.Minute, "cat /run/bx-fakes/"+fakes.Posts(role)+" 2>/dev/null").Stdout
		if err := json.Unmarshal([]byte(out), &posts); err != nil && out != "" {
			t.Fatalf("%s: %v: %q", fakes.Posts(role), err, out)
		}
	}
	for deadline := time.Now().Add(4 * time.Minute); ; time.Sleep(2 * time.Second) {
		read()
		marked := false
		for _, p := range posts {
			marked = marked || p.Turn != ""
		}
		if marked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no outcome was posted for %s's check; the bot's posts: %+v", role, posts)
		}
	}
	time.Sleep(15 * time.Second)
	read()
	return posts
}

// checkMidTurn is the check of one role's mid-turn kill, given the
// session log before the kill and after the outcome, and the bot's posts
// in the thread. It returns what is wrong.
func checkMidTurn(want midTurnWant, role, session string, before, after []byte, posts []fakes.Post) []string {
	var bad []string
	// The thread: the outcome once, marked; a notice only where allowed.
	var outcomes, notices []fakes.Post
	for _, p := range posts {
		switch {
		case p.Turn != "":
			outcomes = append(outcomes, p)
		case want.notice && strings.HasPrefix(p.Message, "Boxmaker could not answer"):
			notices = append(notices, p)
		default:
			bad = append(bad, fmt.Sprintf("an unexpected post in the thread: %+v", p))
		}
	}
	if len(notices) > 1 {
		bad = append(bad, fmt.Sprintf("%d notices, want at most one: %+v", len(notices), notices))
	}
	wantText := fakes.MidTurnAnswer(role)
	if !want.answered {
		wantText = "The turn was stopped (" + string(wire.StopInterrupted) + "): " + want.stop
	}
	if len(outcomes) != 1 || outcomes[0].Turn != session+":1:1/1" || !strings.HasPrefix(outcomes[0].Message, wantText) {
		bad = append(bad, fmt.Sprintf("outcome posts %+v, want exactly one starting %q marked %s:1:1/1", outcomes, wantText, session))
	}

	// The log: only appended to, every line a record, one turn, ended once.
	if !strings.HasPrefix(string(after), string(before)) || len(before) == 0 {
		bad = append(bad, fmt.Sprintf("the session log after the kill does not extend the %d bytes read before it", len(before)))
	}
	recs, err := parseLog(session, after)
	if err != nil {
		return append(bad, err.Error())
	}
	var users, ends, stops, answers int
	var calls []sessionlog.ToolResult
	for _, r := range recs {
		if r.TurnOf() != 1 {
			bad = append(bad, fmt.Sprintf("a record of turn %d, want only turn 1: %+v", r.TurnOf(), r))
		}
		switch r := r.(type) {
		case *sessionlog.User:
			users++
			if r.Text != fakes.MidTurnMessage(role) {
				bad = append(bad, fmt.Sprintf("the user message is %q, want %q", r.Text, fakes.MidTurnMessage(role)))
			}
		case *sessionlog.Assistant:
			if r.Message.Content == fakes.MidTurnAnswer(role) {
				answers++
			}
		case *sessionlog.ToolResult:
			calls = append(calls, *r)
		case *sessionlog.Stopped:
			stops++
			if r.Reason != wire.StopInterrupted || !strings.HasPrefix(r.Msg, want.stop) {
				bad = append(bad, fmt.Sprintf("the turn stopped for %s (%q), want %s (%q…)", r.Reason, r.Msg, wire.StopInterrupted, want.stop))
			}
		case *sessionlog.TurnEnd:
			ends++
		}
	}
	if users != 1 || ends != 1 || len(recs) == 0 {
		bad = append(bad, fmt.Sprintf("%d user messages and %d turn ends in %d records, want one each", users, ends, len(recs)))
	} else if _, ok := recs[len(recs)-1].(*sessionlog.TurnEnd); !ok {
		bad = append(bad, "the log's last record is not the turn's end")
	}
	if want.answered != (answers == 1) || want.answered == (stops == 1) {
		bad = append(bad, fmt.Sprintf("%d answers and %d stops logged, want the answer: %v", answers, stops, want.answered))
	}
	if want.call == "" && len(calls) != 0 || want.call != "" && (len(calls) != 1 || calls[0].Tool != "recall" || calls[0].Status != want.call) {
		bad = append(bad, fmt.Sprintf("tool results %+v, want the one recall %s (it was under way in %s)", calls, want.call, role))
	}
	return bad
}

// parseLog decodes a session log's bytes strictly, as every reader does.
func parseLog(session string, b []byte) ([]sessionlog.Record, error) {
	if len(b) > 0 && b[len(b)-1] != '\n' {
		return nil, fmt.Errorf("the session log ends in a partial line: %q", b[max(0, len(b)-80):])
	}
	dir, err := os.MkdirTemp("", "midturn")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, session, "0.jsonl")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		return nil, err
	}
	var recs []sessionlog.Record
	err = sessionlog.Scan(p, func(_ int, r sessionlog.Record, _ sessionlog.Trust) error {
		recs = append(recs, r)
		return nil
	})
	return recs, err
}

// mainSocket is the socket each role serves its clients on in a turn.
var mainSocket = map[string]*wire.Socket{
	layout.Gatewayd: &wire.Gateway, layout.Loopd: &wire.Loop, layout.Inferproxy: &wire.Infer,
	layout.Brokerd: &wire.Broker, layout.Memoryd: &wire.Memtool,
}

// respawned waits for role's unit to be active again under a main
// process other than old, listening on its socket, and returns it.
// Active alone is not serving: a unit is active once its process runs.
func (g guest) respawned(t *testing.T, role string, old int) (int, error) {
	t.Helper()
	unit := units.UnitName(role)
	for i := 0; i < 90; i++ {
		time.Sleep(2 * time.Second)
		if pid := g.mainPID(t, unit); pid != 0 && pid != old && strings.TrimSpace(g.sh(t, time.Minute, "systemctl is-active "+unit).Stdout) == "active" && g.listens(t, role, pid) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("%s was not serving again after its pid %d was killed:\n%s", unit, old,
		g.sh(t, time.Minute, "journalctl -u "+unit+" --no-pager -o cat | tail -12").Stdout)
}

// listens reports whether pid listens on role's socket (in pid's network
// namespace: loopd and brokerd have their own, and ss lists one).
func (g guest) listens(t *testing.T, role string, pid int) bool {
	t.Helper()
	path := layout.Socket(units.StateDir, mainSocket[role])
	r := g.sh(t, time.Minute, fmt.Sprintf("nsenter -t %d -n ss -xlpn | grep -F ' %s ' | grep -qF 'pid=%d,'", pid, path, pid))
	return r.Exit == 0
}

// serving waits until every role listens on its socket.
func (g guest) serving(t *testing.T) {
	t.Helper()
	for _, r := range layout.Daemons {
		for i := 0; ; i++ {
			pid := g.mainPID(t, units.UnitName(r))
			if pid != 0 && g.listens(t, r, pid) {
				break
			}
			if i > 60 {
				t.Fatalf("%s does not listen on its socket:\n%s", r, g.sh(t, time.Minute, "journalctl -u "+units.UnitName(r)+" --no-pager -o cat | tail -12").Stdout)
			}
			time.Sleep(2 * time.Second)
		}
	}
}

// fakeFile waits for the fakes to write name and returns it.
func (g guest) fakeFile(t *testing.T, name string) string {
	t.Helper()
	return strings.TrimSpace(g.must(t, "for i in $(seq 600); do [ -s /run/bx-fakes/"+name+" ] && exec cat /run/bx-fakes/"+name+"; sleep 0.2; done; echo no "+name+" >&2; exit 1"))
}

// waitFor waits until the fakes' file name reads at least n.
func (g guest) waitFor(t *testing.T, name, n string) {
	t.Helper()
	want, _ := strconv.Atoi(n)
	for i := 0; ; i++ {
		got, _ := strconv.Atoi(strings.TrimSpace(g.sh(t, time.Minute, "cat /run/bx-fakes/"+name+" 2>/dev/null").Stdout))
		if got >= want {
			return
		}
		if i > 120 {
			t.Fatalf("the fake model served %d requests of the check (%s), want %d; loopd:\n%s", got, name, want,
				g.sh(t, time.Minute, "journalctl -u "+units.UnitName(layout.Loopd)+" --no-pager -o cat | tail -15").Stdout)
		}
		time.Sleep(time.Second)
	}
}

// fileBytes is a guest file's content, exactly.
func (g guest) fileBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(g.must(t, "base64 -w0 "+path)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return b
}
