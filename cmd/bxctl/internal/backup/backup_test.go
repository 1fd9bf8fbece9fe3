package backup

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/first"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/model/chat"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// newState makes a state directory as bxctl up does (one user), with a
// grant, a session log, identity files, a secret and an audit log
// written by the real writer, which it returns open.
func newState(t *testing.T) (string, *audit.Writer) {
	t.Helper()
	state := filepath.Join(t.TempDir(), "state")
	must(t, os.MkdirAll(layout.Config.In(state), 0o700))
	p := first.Params{State: state, Llama: "127.0.0.1:1", Model: "m"}
	for _, c := range first.Configs {
		must(t, os.WriteFile(c.Path(state), []byte(c.Text(p)), 0o600))
	}
	must(t, os.WriteFile(layout.ConfigPath(state, "gatewayd"), []byte("token = \"credential:mattermost-token\"\n"), 0o600))
	u := layout.SingleUser(layout.ID{UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())})
	must(t, layout.Make(state, u))
	must(t, layout.WriteFormat(state, layout.Format))
	must(t, os.WriteFile(filepath.Join(layout.Grants.In(state), "read.toml"), []byte("[[grant]]\nid = \"notes-read\"\ntool = \"read_file\"\npaths = [\"/home/owner/notes\"]\nmax_taint = \"secret\"\nresult_class = \"private\"\nuntrusted = false\nmode = \"auto\"\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(layout.Memory.In(state), "user.md"), []byte("The owner likes tea.\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(layout.GatewaySecrets.In(state), "token"), []byte("tok-canary\n"), 0o600))
	sess := filepath.Join(layout.Sessions.In(state), "s-1")
	must(t, os.Mkdir(sess, 0o750))
	var log []byte
	for _, r := range []sessionlog.Record{
		&sessionlog.User{Turn: 1, Text: "hello"},
		&sessionlog.Assistant{Turn: 1, Message: chat.Message{Role: "assistant", Content: "hi"}},
		&sessionlog.TurnEnd{Turn: 1},
	} {
		b, err := sessionlog.Records.Encode(r)
		must(t, err)
		log = append(append(log, b...), '\n')
	}
	// An append under way: its part is not copied.
	must(t, os.WriteFile(filepath.Join(sess, "0.jsonl"), append(log, `{"type":"user","tu`...), 0o640))
	w, err := audit.Open(layout.Audit.In(state), audit.Options{})
	must(t, err)
	t.Cleanup(func() { w.Close() })
	appendCall(t, w)
	return state, w
}

func appendCall(t *testing.T, w *audit.Writer) {
	t.Helper()
	seq, err := w.Append(&audit.Decision{Record: audit.DecisionRecord{
		Session: "s-1", Tool: "read_file", Arguments: json.RawMessage(`{"path":"/home/owner/notes/a"}`),
		Verdict: audit.Verdict{Outcome: audit.Allowed, Taint: dataclass.Private},
	}})
	must(t, err)
	_, err = w.Append(&audit.Result{Decision: seq, SHA256: strings.Repeat("0a", 32), Size: 3, Class: dataclass.Private})
	must(t, err)
}

func noAnchors(string) ([]audit.Anchor, error) { return nil, nil }

// unanchored restores a backup of from whose owner never anchored it.
func unanchored(from string) Options {
	return Options{Anchors: noAnchors, From: from, NoAnchors: true}
}

// TestBackupUnderLoadRestores: a backup taken while the audit log is
// appended to restores into an empty directory and verifies; it holds
// no secret and names the credentials; the part of a line under way is
// not copied; a config that still names the old directory (written
// before the paths left the configs) names the new one.
func TestBackupUnderLoadRestores(t *testing.T) {
	state, w := newState(t)
	loopd, _ := os.ReadFile(layout.ConfigPath(state, "loopd"))
	must(t, os.WriteFile(layout.ConfigPath(state, "loopd"), append([]byte("state_dir = \""+state+"\"\nsocket_dir = \""+layout.LoopRun.In(state)+"\"\n"), loopd...), 0o600))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				appendCall(t, w)
			}
		}
	}()
	dest := filepath.Join(t.TempDir(), "b")
	m, err := Take(state, dest, time.Now())
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if m.AuditSeq < 2 {
		t.Errorf("audit seq %d in the backup", m.AuditSeq)
	}
	for _, f := range m.Files {
		if strings.HasPrefix(f.Path, "secrets/") || strings.HasPrefix(f.Path, "index/") {
			t.Errorf("the backup holds %s", f.Path)
		}
	}
	if !strings.Contains(strings.Join(m.Credentials, "\n"), "credential:mattermost-token") || !strings.Contains(strings.Join(m.Credentials, "\n"), "secrets/gatewayd/token") {
		t.Errorf("credentials = %q", m.Credentials)
	}
	if err := filepath.Walk(dest, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), "tok-canary") {
				t.Errorf("%s holds the secret", p)
			}
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "restored")
	r, err := Restore(dest, target, unanchored(state))
	if err != nil {
		t.Fatal(err)
	}
	if r.AuditSeq != m.AuditSeq || r.SessionLogs != 1 || r.Grants != 1 {
		t.Errorf("restored: %+v", r)
	}
	if e := audit.VerifyEnd(layout.Audit.In(target), nil); !e.OK() {
		t.Errorf("the restored audit log: %+v", e)
	}
	b, _ := os.ReadFile(filepath.Join(layout.Sessions.In(target), "s-1", "0.jsonl"))
	if !strings.HasSuffix(string(b), "\"turn\":1}\n") {
		t.Errorf("the restored session log ends %q", b[max(0, len(b)-30):])
	}
	cfg, _ := os.ReadFile(layout.ConfigPath(target, "loopd"))
	if strings.Contains(string(cfg), state+"\"") || !strings.Contains(string(cfg), "\""+target+"\"") || !strings.Contains(string(cfg), target+"/") || len(r.Moved) != 1 {
		t.Errorf("loopd.toml not moved:\n%s", cfg)
	}
	if n, err := layout.ReadFormat(target); err != nil || n != layout.Format {
		t.Errorf("restored format %d, %v", n, err)
	}
	if ps := layout.Verify(target, layout.SingleUser(layout.ID{UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())})); len(ps) > 0 {
		t.Errorf("the restored state fails the table: %v", ps)
	}
}

func TestRestoreRefusesNonEmpty(t *testing.T) {
	state, _ := newState(t)
	dest := filepath.Join(t.TempDir(), "b")
	if _, err := Take(state, dest, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(dest, state, unanchored(state)); err == nil || !strings.Contains(err.Error(), "#restore-not-empty") {
		t.Errorf("restore over a state: %v", err)
	}
	if _, err := Take(state, dest, time.Now()); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("a backup over a backup: %v", err)
	}
}

// TestRestoreRefusesCorrupt: each damage is refused naming the file,
// and nothing is left where the state was to go.
func TestRestoreRefusesCorrupt(t *testing.T) {
	for _, c := range []struct {
		name, file string
		damage     func(dest string)
	}{
		{"a flipped byte", "files/memory/user.md", func(d string) {
			p := filepath.Join(d, "files/memory/user.md")
			b, _ := os.ReadFile(p)
			b[0] ^= 1
			os.WriteFile(p, b, 0o600)
		}},
		{"a file added", "files/grants/more.toml", func(d string) {
			os.WriteFile(filepath.Join(d, "files/grants/more.toml"), []byte("[[grant]]\n"), 0o600)
		}},
		{"a file removed", "files/config/loopd.toml", func(d string) { os.Remove(filepath.Join(d, "files/config/loopd.toml")) }},
		{"the manifest cut", "manifest.json", func(d string) {
			p := filepath.Join(d, "manifest.json")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)/2], 0o600)
		}},
		{"no manifest", "manifest.json", func(d string) { os.Remove(filepath.Join(d, "manifest.json")) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			state, _ := newState(t)
			dest := filepath.Join(t.TempDir(), "b")
			if _, err := Take(state, dest, time.Now()); err != nil {
				t.Fatal(err)
			}
			c.damage(dest)
			target := filepath.Join(t.TempDir(), "restored")
			_, err := Restore(dest, target, unanchored(state))
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.File != c.file || !strings.Contains(err.Error(), "#restore-corrupt") {
				t.Fatalf("restore = %v; want it refused naming %s", err, c.file)
			}
			if ents, _ := os.ReadDir(filepath.Dir(target)); len(ents) != 0 {
				t.Errorf("a refused restore left %v", ents)
			}
		})
	}
}

// TestRestoreVerifies: a backup whose files match its manifest but fail
// their own checks (a session log that does not decode, an audit log
// short of the owner's anchor) is refused and nothing is left.
func TestRestoreVerifies(t *testing.T) {
	state, _ := newState(t)
	dest := filepath.Join(t.TempDir(), "b")
	m, err := Take(state, dest, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "restored")
	past := func(log string) ([]audit.Anchor, error) {
		if log != m.AuditLog {
			return nil, nil
		}
		return []audit.Anchor{{Log: log, Seq: m.AuditSeq + 5, Hash: strings.Repeat("ab", 32), Time: "2026-12-01T00:00:00.000000000Z"}}, nil
	}
	if _, err := Restore(dest, target, Options{Anchors: past, From: state}); err == nil || !strings.Contains(err.Error(), "audit log does not verify") {
		t.Errorf("an anchor past the backup's end: %v", err)
	}
	// Re-hash a session log that does not decode into the manifest.
	p := filepath.Join(dest, "files/sessions/s-1/0.jsonl")
	bad := []byte(`{"type":"user","turn":1,"text":"hi","extra":1}` + "\n")
	os.WriteFile(p, bad, 0o600)
	for i, f := range m.Files {
		if f.Path == "sessions/s-1/0.jsonl" {
			sum, n, _ := hashFile(p)
			m.Files[i].SHA256, m.Files[i].Size = sum, n
		}
	}
	must(t, writeManifest(dest, m))
	if _, err := Restore(dest, target, unanchored(state)); err == nil || !strings.Contains(err.Error(), "does not decode") || !strings.Contains(err.Error(), "#restore-verify") {
		t.Errorf("a session log that does not decode: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(target)); len(ents) != 0 {
		t.Errorf("a refused restore left %v", ents)
	}
}
