// Package memd is memoryd's daemon: it owns memory/ and index/, and serves
// memory.sock (loopd: identity block out, finished turns in),
// memtool.sock (brokerd: decided memory tool calls) and memadmin.sock
// (bxctl: undo, reindex, review).
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
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"wntrmute.dev/boxmaker/cmd/memoryd/internal/recall"
	"wntrmute.dev/boxmaker/cmd/memoryd/internal/store"
	"wntrmute.dev/boxmaker/pkg/daemon"
	"wntrmute.dev/boxmaker/pkg/frame"
	"wntrmute.dev/boxmaker/pkg/sockets"
	"wntrmute.dev/boxmaker/pkg/strict"
	"wntrmute.dev/boxmaker/pkg/wire"
)

// Socket names.
const (
	MemorySocket  = "memory.sock"
	MemtoolSocket = "memtool.sock"
	AdminSocket   = "memadmin.sock"
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
}

// New opens memory/ and index/ under the state directory and catches the
// index up with the files.
func New(log *slog.Logger, cfg Config) (*Memd, error) {
	st, err := store.Open(filepath.Join(cfg.StateDir, "memory"), cfg.StageIdentityWrites, nil)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(cfg.StateDir, "index"), 0o700); err != nil {
		st.Close()
		return nil, err
	}
	ix, err := recall.Open(filepath.Join(cfg.StateDir, "index", "recall.db"), cfg.maxClass, nil)
	if err != nil {
		st.Close()
		return nil, err
	}
	m := &Memd{cfg: cfg, log: log, store: st, index: ix, retriever: ix}
	if _, err := m.catchUp(); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// Close closes the store and the index.
func (m *Memd) Close() error { return errors.Join(m.store.Close(), m.index.Close()) }

// catchUp indexes every ended turn and note not yet indexed. A session
// log it cannot read (loopd refuses a damaged one until the owner acts)
// is logged and skipped, not fatal: the rest of memory still works.
func (m *Memd) catchUp() (int, error) {
	files, err := recall.LogFiles(filepath.Join(m.cfg.StateDir, "sessions"))
	if err != nil {
		return 0, err
	}
	total := 0
	m.skipped = nil
	for _, f := range files {
		turns, err := recall.ReadLog(f)
		if err != nil {
			m.log.Warn("session log not indexed; see docs/runbook.md#memoryd-unavailable", "file", f, "err", err.Error())
			m.skipped = append(m.skipped, filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f))
			continue
		}
		n, err := m.index.AddTurns(turns)
		total += n
		if err != nil {
			return total, err
		}
	}
	m.notesMu.Lock()
	defer m.notesMu.Unlock()
	notes, all := m.store.NotesFrom(0)
	n, err := m.index.AddNotes(noteDocs(notes))
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
		if n.Kind == store.KindReview {
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
		dir, name string
		uids      []uint32
		h         sockets.Handler
	}
	var lns []*sockets.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	for _, s := range []sock{
		{cfg.MemorySocketDir, MemorySocket, cfg.MemoryAllowUIDs, m.serveMemory},
		{cfg.MemtoolSocketDir, MemtoolSocket, cfg.MemtoolAllowUIDs, m.serveMemtool},
		{cfg.AdminSocketDir, AdminSocket, cfg.AdminAllowUIDs, m.serveAdmin},
	} {
		ln, err := sockets.Listen(sockets.Config{Dir: s.dir, Name: s.name, AllowUIDs: s.uids, IdleTimeout: 5 * time.Minute, Logger: log})
		if err != nil {
			return daemon.Refuse(err)
		}
		lns = append(lns, ln)
	}
	log.Info("serving", "memory", lns[0].Path(), "memtool", lns[1].Path(), "admin", lns[2].Path(), "state", cfg.StateDir)
	errc := make(chan error, 3)
	handlers := []sockets.Handler{m.serveMemory, m.serveMemtool, m.serveAdmin}
	for i, ln := range lns {
		go func() { errc <- ln.Serve(ctx, handlers[i]) }()
	}
	return errors.Join(<-errc, <-errc, <-errc)
}

// readOne reads one message, strictly, from any of the sockets' union.
func readOne(c net.Conn) (strict.Variant, error) {
	body, err := frame.Read(c, wire.MemoryFrameMax)
	if err != nil {
		return nil, err
	}
	return wire.MemorydMessages.Decode(body)
}

func (m *Memd) send(c net.Conn, v strict.Variant) {
	out, err := wire.MemorydMessages.Encode(v)
	if err == nil {
		err = frame.Write(c, out, wire.MemoryFrameMax)
	}
	if err != nil {
		m.log.Warn("write", "err", err.Error())
	}
}

// forbidden refuses a message meant for another socket, and logs it.
func (m *Memd) forbidden(c net.Conn, peer sockets.Peer, socket string, v strict.Variant) {
	m.log.Warn("message refused: not accepted on this socket; see docs/runbook.md#socket-forbidden",
		"socket", socket, "message", v.Tag(), "uid", peer.UID(), "pid", peer.PID())
	m.send(c, &wire.Error{Op: v.Tag(), Kind: wire.Forbidden, Msg: v.Tag() + " is not accepted on " + socket})
}

// request reads one request; a frame that does not decode is answered
// with invalid.
func (m *Memd) request(c net.Conn, socket string) (strict.Variant, bool) {
	v, err := readOne(c)
	if err != nil {
		m.send(c, &wire.Error{Op: socket, Kind: wire.Invalid, Msg: "bad frame: " + err.Error()})
		return nil, false
	}
	return v, true
}
