package backup

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// outboxSchema is memoryd's outbox as cmd/memoryd/internal/fleet makes
// it (outbox.go outboxSchema with the lookup column setUp adds, and
// forget.go forgetSchema), which bxctl may not import.
const outboxSchema = `
CREATE TABLE filed(key TEXT PRIMARY KEY, filing TEXT NOT NULL, reason TEXT NOT NULL, at TEXT NOT NULL);
CREATE TABLE outbox(seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, workspace TEXT NOT NULL,
	hsession TEXT NOT NULL, peer TEXT NOT NULL, content TEXT NOT NULL, metadata TEXT NOT NULL,
	sent INTEGER NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0, next_at INTEGER NOT NULL DEFAULT 0, last_error TEXT NOT NULL DEFAULT '',
	lookup INTEGER NOT NULL DEFAULT 0);
CREATE TABLE late(key TEXT PRIMARY KEY, reason TEXT NOT NULL, at TEXT NOT NULL);
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE rehomed(workspace TEXT NOT NULL, session TEXT NOT NULL, hsession TEXT NOT NULL, PRIMARY KEY(workspace, session));
CREATE TABLE deletions(workspace TEXT NOT NULL, hsession TEXT NOT NULL, done INTEGER NOT NULL DEFAULT 0, PRIMARY KEY(workspace, hsession));
`

// openOutbox opens state's outbox as memoryd does (WAL, synchronous
// FULL), with a queued deletion, one sent and one unsent message.
func openOutbox(t *testing.T, state string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", sqliteURI(filepath.Join(state, OutboxPath), "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)"))
	must(t, err)
	t.Cleanup(func() { db.Close() })
	_, err = db.Exec(outboxSchema + `
INSERT INTO deletions(workspace, hsession) VALUES('w', 's-1');
INSERT INTO outbox(id, workspace, hsession, peer, content, metadata, sent) VALUES('s-1-e0-r0', 'w', 's-1', 'owner', 'hello', '{}', 1);
INSERT INTO outbox(id, workspace, hsession, peer, content, metadata) VALUES('s-1-e0-r1', 'w', 's-1', 'agent', 'hi', '{}');`)
	must(t, err)
	return db
}

// TestBackupTakesTheOutbox: the fleet outbox, written to while the
// backup runs, is in the backup as a consistent snapshot, passes the
// restore's integrity check, keeps the queued forget deletion nothing
// else records, and comes back as a rebuilt outbox (every unsent message
// looked for in Honcho before it is sent).
func TestBackupTakesTheOutbox(t *testing.T) {
	state, _ := newState(t)
	db := openOutbox(t, state)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := db.Exec(`INSERT INTO outbox(id, workspace, hsession, peer, content, metadata) VALUES(?, 'w', 's-2', 'owner', 'more', '{}')`, fmt.Sprintf("s-2-e0-r%d", i)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	dest := filepath.Join(t.TempDir(), "b")
	m, err := Take(state, dest, time.Now())
	close(stop)
	wg.Wait()
	must(t, err)
	if !slices.ContainsFunc(m.Files, func(f File) bool { return f.Path == OutboxPath }) {
		t.Fatalf("the backup lacks %s: %v", OutboxPath, m.Files)
	}
	for _, f := range m.Files {
		if strings.HasPrefix(f.Path, "index/") && f.Path != OutboxPath {
			t.Errorf("the backup holds %s", f.Path)
		}
	}
	target := filepath.Join(t.TempDir(), "restored")
	r, err := Restore(dest, target, unanchored(state))
	must(t, err)
	if r.Outbox < 1 {
		t.Errorf("the restored outbox has %d unsent messages", r.Outbox)
	}
	got, err := sql.Open("sqlite", sqliteURI(filepath.Join(target, OutboxPath), "mode=ro"))
	must(t, err)
	defer got.Close()
	var deletions, notLookedUp, rebuilt int
	must(t, got.QueryRow(`SELECT count(*) FROM deletions WHERE hsession = 's-1' AND done = 0`).Scan(&deletions))
	must(t, got.QueryRow(`SELECT count(*) FROM outbox WHERE sent = 0 AND lookup = 0`).Scan(&notLookedUp))
	must(t, got.QueryRow(`SELECT count(*) FROM meta WHERE key = 'rebuilt'`).Scan(&rebuilt))
	if deletions != 1 || notLookedUp != 0 || rebuilt != 1 {
		t.Errorf("restored outbox: %d queued deletions (want 1), %d unsent messages not looked up first (want 0), rebuilt %d (want 1)", deletions, notLookedUp, rebuilt)
	}
	// The source was never written by the backup: its unsent message is
	// as memoryd left it.
	var srcLookup int
	must(t, db.QueryRow(`SELECT lookup FROM outbox WHERE id = 's-1-e0-r1'`).Scan(&srcLookup))
	if srcLookup != 0 {
		t.Error("the backup changed the live outbox")
	}
}

// TestRestoreRefusesADamagedOutbox: an outbox whose bytes match the
// manifest but fail SQLite's integrity check is refused, named.
func TestRestoreRefusesADamagedOutbox(t *testing.T) {
	state, _ := newState(t)
	db := openOutbox(t, state)
	for i := 0; i < 200; i++ {
		_, err := db.Exec(`INSERT INTO outbox(id, workspace, hsession, peer, content, metadata) VALUES(?, 'w', 's-2', 'owner', ?, '{}')`, fmt.Sprint(i), strings.Repeat("x", 200))
		must(t, err)
	}
	dest := filepath.Join(t.TempDir(), "b")
	m, err := Take(state, dest, time.Now())
	must(t, err)
	p := filepath.Join(dest, FilesDir, OutboxPath)
	b, err := os.ReadFile(p)
	must(t, err)
	for i := 4096; i < len(b); i += 4096 { // every b-tree page's type byte but the schema's
		b[i] ^= 0xff
	}
	must(t, os.WriteFile(p, b, 0o600))
	for i, f := range m.Files {
		if f.Path == OutboxPath {
			sum, n, _ := hashFile(p)
			m.Files[i].SHA256, m.Files[i].Size = sum, n
		}
	}
	must(t, writeManifest(dest, m))
	target := filepath.Join(t.TempDir(), "restored")
	if _, err := Restore(dest, target, unanchored(state)); err == nil || !strings.Contains(err.Error(), OutboxPath) || !strings.Contains(err.Error(), "#restore-verify") {
		t.Errorf("a damaged outbox: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(target)); len(ents) != 0 {
		t.Errorf("a refused restore left %v", ents)
	}
}

// TestEveryLayoutPlaceIsBackedUpOrDeclared: each entry of the layout
// table is taken by a backup (a tree, a log, a file, or inside one), or
// declared held in part or left out, with its reason. A place added to
// the table and to neither fails here until someone decides.
func TestEveryLayoutPlaceIsBackedUpOrDeclared(t *testing.T) {
	decided := map[*layout.Entry]string{}
	for _, e := range append(slices.Clone(trees), taken...) {
		decided[e] = "taken"
	}
	for _, p := range append(slices.Clone(partly), leftOut...) {
		if strings.TrimSpace(p.Why) == "" {
			t.Errorf("%s is declared without a reason", p.Entry.Path)
		}
		if _, twice := decided[p.Entry]; twice {
			t.Errorf("%s is declared twice", p.Entry.Path)
		}
		decided[p.Entry] = p.Why
	}
	for _, e := range layout.Table {
		if decided[e] != "" {
			continue
		}
		var holder *layout.Entry
		for o, how := range decided {
			if o != &layout.State && how != "" && strings.HasPrefix(e.Path, o.Path+"/") && (holder == nil || len(o.Path) > len(holder.Path)) {
				holder = o
			}
		}
		if holder == nil || decided[holder] != "taken" && !slices.ContainsFunc(leftOut, func(p Part) bool { return p.Entry == holder }) {
			t.Errorf("layout place %s is neither backed up nor declared left out (with the reason) in package backup", e.Path)
		}
	}
	// The manifest says each reason.
	for _, p := range append(slices.Clone(partly[1:]), leftOut...) {
		if !slices.Contains(leftOutText(), p.Why) {
			t.Errorf("the manifest does not say why %s is left", p.Entry.Path)
		}
	}
}

// TestEveryTakenTreeIsInTheBackup: a file put in each directory the
// table names that a backup takes as a tree is in the backup.
func TestEveryTakenTreeIsInTheBackup(t *testing.T) {
	state, _ := newState(t)
	var want []string
	for _, e := range trees {
		if e.Kind != layout.Dir {
			continue
		}
		p := filepath.Join(e.In(state), "probe.txt")
		must(t, os.MkdirAll(filepath.Dir(p), 0o700))
		must(t, os.WriteFile(p, []byte(e.Path), 0o600))
		want = append(want, e.Path+"/probe.txt")
	}
	m, err := Take(state, filepath.Join(t.TempDir(), "b"), time.Now())
	must(t, err)
	for _, w := range want {
		if !slices.ContainsFunc(m.Files, func(f File) bool { return f.Path == w }) {
			t.Errorf("the backup lacks %s", w)
		}
	}
}
