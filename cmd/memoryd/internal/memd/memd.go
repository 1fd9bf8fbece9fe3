// Package memd is memoryd's daemon: it owns memory/ and index/, and serves
// memory.sock (loopd: identity block out, finished turns in),
// memtool.sock (brokerd: decided memory tool calls), memadmin.sock
// (bxctl: undo, reindex, review, the fleet outbox) and memchat.sock
// (gatewayd: the owner's !why and !forget from the chat); with a [honcho]
// table it runs fleet memory (package fleet) beside them.
//
// Invariants:
//   - each socket takes only its own messages and refuses the others'
//     with forbidden (a session's tool call can never undo an edit or
//     read the identity block; loopd can never edit memory);
//   - a call's taint and trust are brokerd's, never the session's own
//     word; memoryd labels its results (recall's hits with their class and
//     source), and brokerd raises the session with them;
//   - sessions/ is only read, and only its regular files: no symlink
//     (of a log or a session directory) is followed.
package memd

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"wntrmute.dev/boxmaker/cmd/memoryd/internal/fleet"
	"wntrmute.dev/boxmaker/cmd/memoryd/internal/recall"
	"wntrmute.dev/boxmaker/cmd/memoryd/internal/store"
	"wntrmute.dev/boxmaker/pkg/host/daemon"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
)

// Memd is the running daemon.
type Memd struct {
	cfg   Config
	log   *slog.Logger
	store *store.Store
	index *recall.Index
	// retriever answers recall: the local index (Honcho will be another).
	retriever recall.Retriever
	adminMu   sync.Mutex // serialises reindexes; guards skipped
	// skipped are the session logs the last catch-up could not read.
	skipped []string
	notesMu sync.Mutex // guards notesIndexed; held while notes are indexed
	// notesIndexed is how many notes of notes.md, in file order, are in
	// the index.
	notesIndexed int
	// fleet is fleet memory (Honcho), nil without a [honcho] table.
	fleet  *fleet.Fleet
	chanMu sync.Mutex // guards channels
	// channels is each session's channel, as loopd named it or its
	// baseline holds it (project.go).
	channels map[string]string
	// codes are the chat forgets waiting for their code (chat.go).
	codes codes
}

// New opens memory/ and index/ under the state directory and catches the
// index up with the files.
func New(log *slog.Logger, cfg Config) (*Memd, error) {
	st, err := store.Open(layout.Memory.In(cfg.StateDir), cfg.StageIdentityWrites, nil)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(layout.Index.In(cfg.StateDir), 0o700); err != nil {
		st.Close()
		return nil, err
	}
	ix, err := recall.Open(layout.RecallIndex(cfg.StateDir), cfg.maxClass, nil)
	if err != nil {
		st.Close()
		return nil, err
	}
	m := &Memd{cfg: cfg, log: log, store: st, index: ix, retriever: ix}
	if _, err := m.catchUp(); err != nil {
		m.Close()
		return nil, err
	}
	if err := m.openFleet(); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// Close closes the store and the index.
func (m *Memd) Close() error {
	err := errors.Join(m.store.Close(), m.index.Close())
	if m.fleet != nil {
		err = errors.Join(err, m.fleet.Close())
	}
	return err
}

// catchUp indexes every ended turn and note not yet indexed. A session
// log it cannot read (loopd refuses a damaged one until the owner acts)
// is logged and skipped, not fatal: the rest of memory still works.
func (m *Memd) catchUp() (int, error) {
	files, err := sessionlog.Files(layout.Sessions.In(m.cfg.StateDir))
	if err != nil {
		return 0, err
	}
	total := 0
	m.skipped = nil
	m.index.SetForgotten(m.store.Forgotten())
	for _, f := range files {
		turns, err := recall.ReadLog(f)
		if err != nil {
			m.log.Warn("session log not indexed; see docs/runbook.md#memoryd-unavailable", "file", f, "err", err.Error())
			m.skipped = append(m.skipped, filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f))
			continue
		}
		n, err := m.index.AddTurns(m.projectTurns(turns))
		total += n
		if err != nil {
			return total, err
		}
	}
	m.notesMu.Lock()
	defer m.notesMu.Unlock()
	notes, all := m.store.NotesFrom(0)
	n, err := m.index.AddNotes(m.projectDocs(noteDocs(notes)))
	if err == nil {
		m.notesIndexed = all
	}
	return total + n, err
}

// Rebuild empties the index and indexes everything again from the files.
// The caller holds m.adminMu.
func (m *Memd) Rebuild() (int, error) {
	if err := m.index.Clear(); err != nil {
		return 0, err
	}
	return m.catchUp()
}

func noteDocs(notes []store.Note) []recall.Doc {
	var out []recall.Doc
	for _, n := range notes {
		if n.Kind == store.KindReview || n.Tombstone() {
			continue
		}
		out = append(out, recall.Doc{Text: n.Text, Source: n.Source(), Class: n.Class, Session: n.Session, Note: n.ID})
	}
	return out
}

// Run serves the three sockets until ctx is cancelled.
func Run(ctx context.Context, log *slog.Logger, cfg Config) error {
	m, err := New(log, cfg)
	if err != nil {
		return daemon.Refuse(err)
	}
	defer m.Close()
	type sock struct {
		dir  string
		uids []uint32
		srv  *rpc.Server
	}
	var lns []*sockets.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	socks := []sock{
		{cfg.MemorySocketDir, cfg.MemoryAllowUIDs, m.memoryServer()},
		{cfg.MemtoolSocketDir, cfg.MemtoolAllowUIDs, m.memtoolServer()},
		{cfg.AdminSocketDir, cfg.AdminAllowUIDs, m.adminServer()},
	}
	if cfg.ChatSocketDir != "" {
		socks = append(socks, sock{cfg.ChatSocketDir, cfg.ChatAllowUIDs, m.chatServer()})
	}
	for _, s := range socks {
		ln, err := rpc.Listen(s.srv.Socket(), sockets.Config{Dir: s.dir, AllowUIDs: s.uids, Logger: log})
		if err != nil {
			return daemon.Refuse(err)
		}
		lns = append(lns, ln)
	}
	log.Info("serving", "memory", lns[0].Path(), "memtool", lns[1].Path(), "admin", lns[2].Path(), "chat", cfg.ChatSocketDir != "", "state", cfg.StateDir)
	go m.runFleet(ctx)
	errc := make(chan error, len(lns))
	for i, ln := range lns {
		go func() { errc <- ln.Serve(ctx, socks[i].srv.Serve) }()
	}
	var errs []error
	for range lns {
		errs = append(errs, <-errc)
	}
	return errors.Join(errs...)
}
