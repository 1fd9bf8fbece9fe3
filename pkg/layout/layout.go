// Package layout is the one table of a Boxmaker state directory: every
// path under it, who writes it, the mode it is made with, the socket each
// socket directory holds, and (config.go) every default config `bxctl up`
// writes. bxctl, the stack tests and (with the containment issue) the
// daemons, the systemd units and the NixOS module all read this table;
// none spells a path of its own.
//
// Invariants:
//   - a path is written once, here, relative to the state directory;
//   - each pair of roles that shares a socket has a directory of its own
//     under run/ holding exactly that socket, so the directory's
//     permissions decide who may connect (package sockets);
//   - a socket's file name comes from its [wire.Socket], never from here.
//
// The table is a list of [Entry] values so that a column is a field: the
// containment issue adds each entry's user and group, and daemons check
// their own entries against it at start-up.
package layout

import (
	"io/fs"
	"path/filepath"

	"wntrmute.dev/boxmaker/pkg/wire"
)

// Kind is what an entry is.
type Kind int

// The kinds.
const (
	Dir       Kind = iota + 1 // a directory of files
	SocketDir                 // a directory that holds one socket
	File                      // one file
)

// Entry is one path under the state directory.
type Entry struct {
	Path   string      // relative to the state directory, slash-separated
	Kind   Kind        //
	Mode   fs.FileMode // the mode it is made with
	Writer string      // who writes it: a role, "owner" or "bxctl"
	// Up is whether `bxctl up` makes it (the rest are made by their
	// writer, or by the owner).
	Up     bool
	Socket string // for a SocketDir: the socket's file name
	Doc    string // what it holds
}

// In is the entry's absolute path in state directory state.
func (e *Entry) In(state string) string { return filepath.Join(state, filepath.FromSlash(e.Path)) }

// SocketIn is the path of the socket a SocketDir holds, in state.
func (e *Entry) SocketIn(state string) string { return filepath.Join(e.In(state), e.Socket) }

// The entries.
var (
	Config   = Entry{Path: "config", Kind: Dir, Mode: 0o700, Writer: "owner", Up: true, Doc: "each role's config, <role>.toml; bxctl up writes the first ones (config.go)"}
	Logs     = Entry{Path: "logs", Kind: Dir, Mode: 0o700, Writer: "bxctl", Up: true, Doc: "each role's output under bxctl up, <role>.log"}
	Sessions = Entry{Path: "sessions", Kind: Dir, Mode: 0o700, Writer: "loopd", Up: true, Doc: "session logs, <id>/<epoch>.jsonl (+ baseline snapshot)"}
	Grants   = Entry{Path: "grants", Kind: Dir, Mode: 0o700, Writer: "owner", Up: true, Doc: "grant files, *.toml; read-only to brokerd"}
	Audit    = Entry{Path: "audit", Kind: Dir, Mode: 0o700, Writer: "brokerd", Up: true, Doc: "the hash-chained audit log, *.jsonl"}
	Broker   = Entry{Path: "broker", Kind: Dir, Mode: 0o700, Writer: "brokerd", Doc: "brokerd's own state: sessions/<id>.json (rebuildable from audit/), run/ (per-call scratch)"}
	Memory   = Entry{Path: "memory", Kind: Dir, Mode: 0o700, Writer: "memoryd", Doc: "identity files, notes.md, edits/ (the journal and undo copies)"}
	Journal  = Entry{Path: "memory/edits/journal.jsonl", Kind: File, Mode: 0o600, Writer: "memoryd", Doc: "every write to memory/, in order (bxctl memory log)"}
	Index    = Entry{Path: "index", Kind: Dir, Mode: 0o700, Writer: "memoryd", Doc: "the recall index (disposable: rebuilt from sessions/ and notes.md)"}
	Gateway  = Entry{Path: "gateway", Kind: Dir, Mode: 0o700, Writer: "gatewayd", Doc: "gatewayd's record of approval posts to mark dead (approvals.jsonl) and its cursor of handled posts (cursor.json) and the answers delivered per session (delivered.json)"}
	Jobs     = Entry{Path: "jobs", Kind: Dir, Mode: 0o700, Writer: "owner", Up: true, Doc: "the owner's scheduled jobs, *.toml; loopd reads them and never writes them"}

	InferRun    = socketDir("infer", "inferproxy", &wire.Infer)
	LoopRun     = socketDir("loop", "loopd", &wire.Loop)
	BrokerRun   = socketDir("broker", "brokerd", &wire.Broker)
	AdminRun    = socketDir("admin", "brokerd", &wire.Admin)
	GatewayRun  = socketDir("gateway", "gatewayd", &wire.Gateway)
	MemoryRun   = socketDir("memory", "memoryd", &wire.Memory)
	MemtoolRun  = socketDir("memtool", "memoryd", &wire.Memtool)
	MemadminRun = socketDir("memadmin", "memoryd", &wire.Memadmin)
	// PodmanRun holds the Podman API service bxctl up runs for brokerd's
	// tool containers (Podman's socket, not one of ours).
	PodmanRun = Entry{Path: "run/podman", Kind: SocketDir, Mode: 0o700, Writer: "bxctl", Up: true, Socket: "podman.sock",
		Doc: "the Podman API service bxctl up runs for brokerd"}
)

func socketDir(pair, listener string, s *wire.Socket) Entry {
	return Entry{Path: "run/" + pair, Kind: SocketDir, Mode: 0o700, Writer: listener, Up: true, Socket: s.Name,
		Doc: s.Name + ", " + listener + "'s socket"}
}

// Table is every entry.
var Table = []*Entry{&Config, &Logs, &Sessions, &Grants, &Audit, &Broker, &Memory, &Journal, &Index, &Gateway, &Jobs,
	&InferRun, &LoopRun, &BrokerRun, &AdminRun, &GatewayRun, &MemoryRun, &MemtoolRun, &MemadminRun, &PodmanRun}

// SocketFor is the socket directory entry that holds s.
func SocketFor(s *wire.Socket) *Entry {
	for _, e := range Table {
		if e.Kind == SocketDir && e.Socket == s.Name {
			return e
		}
	}
	panic("layout: no socket directory for " + s.Name) // every socket has one: TestEverySocketHasADir
}

// In is the absolute path of every entry in state directory state, in
// table order: what no tool container may mount (brokerd's runner).
func In(state string) []string {
	out := make([]string, len(Table))
	for i, e := range Table {
		out[i] = e.In(state)
	}
	return out
}

// Socket is the path of socket s in state directory state.
func Socket(state string, s *wire.Socket) string { return SocketFor(s).SocketIn(state) }
