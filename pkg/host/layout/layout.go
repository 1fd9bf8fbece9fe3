// Package layout is the one table of a Boxmaker state directory: every
// path under it, who writes it, the user and group that own it, the mode
// it is made with, the socket each socket directory holds and which
// roles' uids its listener accepts, and (config.go) where each role's
// config is (the first configs themselves are package roleconf/first's,
// encoded from each role's config type). bxctl, the stack tests, the
// containment test (checks/contain), the daemons at start-up ([Check])
// and `bxctl doctor` ([Verify]) all read this table; none spells a path, owner or mode of its
// own. docs/threat-model.md holds the same table ([Markdown]), and a test
// keeps the two equal.
//
// Invariants:
//   - a path is written once, here, relative to the state directory;
//   - each pair of roles that shares a socket has a directory of its own
//     under run/ holding exactly that socket, owned by the listener, its
//     group the client's (setgid, so the socket inherits it), so the
//     directory's permissions decide who may connect (package sockets)
//     and the listener's peer check is the second lock;
//   - a socket's file name comes from its [wire.Socket], never from here;
//   - with one user for every role ([SingleUser]) every mode loses its
//     group and other bits: nothing is shared with another user;
//   - what runs as root over the tree ([Make], [GiveSocket]) reaches
//     every entry below the state directory one name at a time from its
//     parent's descriptor, never through a link, opens only the kind the
//     table names (a FIFO, socket or device is refused unopened), and
//     changes an entry only through a descriptor of that entry, so no
//     path a role can rename is ever looked up twice.
package layout

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"wntrmute.dev/boxmaker/pkg/socket/wire"
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
	Mode   fs.FileMode // its mode with a user per role (setgid included)
	Writer string      // who writes it: a role, "owner" or "bxctl"
	// Up is whether `bxctl up` makes it (the rest are made by their
	// writer, or by the owner).
	Up     bool
	Socket string // for a SocketDir: the socket's file name
	Doc    string // what it holds

	Owner string // the role whose uid owns it
	Group string // the role whose gid is its group; "" is the owner's
	// Files is the mode of the files in a Dir (its writer makes them so,
	// and bxctl up gives the owner's files in it this mode); for a
	// SocketDir, the socket's.
	Files fs.FileMode
	// Accept are the roles whose uids a SocketDir's listener accepts.
	Accept []string
	// Rests is what keeps the entry's cell of the threat model true.
	Rests string
}

// In is the entry's absolute path in state directory state.
func (e *Entry) In(state string) string { return filepath.Join(state, filepath.FromSlash(e.Path)) }

// SocketIn is the path of the socket a SocketDir holds, in state.
func (e *Entry) SocketIn(state string) string { return filepath.Join(e.In(state), e.Socket) }

// single drops a mode's group and other bits (and setgid).
func single(m fs.FileMode) fs.FileMode { return m & 0o700 }

// ModeFor is the entry's mode under u.
func (e *Entry) ModeFor(u Users) fs.FileMode {
	if u.Single() {
		return single(e.Mode)
	}
	return e.Mode
}

// FilesFor is the mode of the files in the entry under u.
func (e *Entry) FilesFor(u Users) fs.FileMode {
	if u.Single() {
		return single(e.Files)
	}
	return e.Files
}

// GroupRole is the role whose gid is the entry's group.
func (e *Entry) GroupRole() string {
	if e.Group == "" {
		return e.Owner
	}
	return e.Group
}

// IDs are the uid and gid that own the entry under u.
func (e *Entry) IDs(u Users) (uid, gid uint32) {
	return u.Of(e.Owner).UID, u.Of(e.GroupRole()).GID
}

// The entries.
var (
	State = Entry{Path: ".", Kind: Dir, Mode: 0o711, Writer: "bxctl", Up: true, Owner: Owner,
		Doc: "the state directory; every role passes through it, none lists it", Rests: "mode 0711, owned by the owner"}
	Run = Entry{Path: "run", Kind: Dir, Mode: 0o711, Writer: "bxctl", Up: true, Owner: Owner,
		Doc: "the socket directories, one per pair of roles", Rests: "mode 0711: entered by name, never listed"}
	Config = Entry{Path: "config", Kind: Dir, Mode: 0o711, Writer: "owner", Up: true, Owner: Owner, Files: 0o640,
		Doc: "each role's config, <role>.toml; bxctl up writes the first ones (package roleconf/first)", Rests: "mode 0711; each config 0640, its group its role's"}
	Logs = Entry{Path: "logs", Kind: Dir, Mode: 0o700, Writer: "bxctl", Up: true, Owner: Owner, Files: 0o600,
		Doc: "each role's output under bxctl up, <role>.log", Rests: "bxctl opens each log and hands the role its descriptor"}
	Sessions = Entry{Path: "sessions", Kind: Dir, Mode: fs.ModeSetgid | 0o750, Writer: "loopd", Up: true, Owner: Loopd, Group: Memoryd, Files: 0o640,
		Doc: "session logs, <id>/<epoch>.jsonl (+ baseline snapshot)", Rests: "setgid 0750, group memoryd's: memoryd reads them for reindexing, nothing writes them but loopd"}
	Grants = Entry{Path: "grants", Kind: Dir, Mode: 0o750, Writer: "owner", Up: true, Owner: Owner, Group: Brokerd, Files: 0o640,
		Doc: "grant files, *.toml; read-only to brokerd", Rests: "0750, group brokerd's; grant files 0640: only brokerd reads, only the owner writes"}
	// MCP holds the owner's MCP server declarations and their pins
	// (package mcpserver), beside grants/ and under the same rule: only
	// the owner writes, only brokerd reads.
	MCP = Entry{Path: "mcp", Kind: Dir, Mode: 0o750, Writer: "owner", Up: true, Owner: Owner, Group: Brokerd, Files: 0o640,
		Doc: "MCP server declarations, NAME.toml, and their pins, NAME.pin.json (bxctl mcp pin); read-only to brokerd", Rests: "0750, group brokerd's; files 0640: only brokerd reads, only the owner writes"}
	// Audit is inside broker/ so that its head record (pkg/logs/audit: beside
	// the log's directory, broker/audit.head) is in a directory brokerd
	// may write, with a user per role.
	Audit = Entry{Path: "broker/audit", Kind: Dir, Mode: 0o700, Writer: "brokerd", Up: true, Owner: Brokerd, Files: 0o600,
		Doc: "the hash-chained audit log, *.jsonl; its head record beside it, broker/audit.head", Rests: "0700 brokerd's, inside broker/"}
	Broker = Entry{Path: "broker", Kind: Dir, Mode: 0o700, Writer: "brokerd", Up: true, Owner: Brokerd, Files: 0o600,
		Doc: "brokerd's own state: sessions/<id>.json (rebuildable from audit/), run/ (per-call scratch)", Rests: "0700 brokerd's"}
	Memory = Entry{Path: "memory", Kind: Dir, Mode: 0o700, Writer: "memoryd", Up: true, Owner: Memoryd, Files: 0o600,
		Doc: "identity files, notes.md, edits/ (the journal and undo copies)", Rests: "0700 memoryd's"}
	Journal = Entry{Path: "memory/edits/journal.jsonl", Kind: File, Mode: 0o600, Writer: "memoryd", Owner: Memoryd,
		Doc: "every write to memory/, in order (bxctl memory log)", Rests: "inside memory/"}
	Index = Entry{Path: "index", Kind: Dir, Mode: 0o700, Writer: "memoryd", Up: true, Owner: Memoryd, Files: 0o600,
		Doc: "the recall index (disposable: rebuilt from sessions/ and notes.md)", Rests: "0700 memoryd's"}
	Gateway = Entry{Path: "gateway", Kind: Dir, Mode: 0o700, Writer: "gatewayd", Up: true, Owner: Gatewayd, Files: 0o600,
		Doc: "gatewayd's record of approval posts to mark dead (approvals.jsonl), its cursor of handled posts (cursor.json), the answers delivered per session (delivered.json) and the newest job report posted (jobs.json)", Rests: "0700 gatewayd's"}
	Jobs = Entry{Path: "jobs", Kind: Dir, Mode: 0o750, Writer: "owner", Up: true, Owner: Owner, Group: Loopd, Files: 0o640,
		Doc: "the owner's scheduled jobs, *.toml; loopd reads them and never writes them", Rests: "0750, group loopd's; job files 0640: only loopd reads, only the owner writes"}
	// Proposals holds the grant proposals brokerd writes from an owner's
	// `!approve ID CODE always` (issue 26): brokerd never writes grants/,
	// and a proposal is nothing until the owner applies it (bxctl grants
	// apply N), as the owner, into grants/.
	Proposals = Entry{Path: "proposals", Kind: Dir, Mode: fs.ModeSetgid | 0o750, Writer: "brokerd", Up: true, Owner: Brokerd, Group: Owner, Files: 0o640,
		Doc:   "grant proposals from `!approve ID CODE always`, <id>.toml; nothing reads them but the owner's bxctl grants proposals and apply",
		Rests: "setgid 0750 brokerd's, group the owner's: brokerd writes, the owner reads; brokerd loads grants only from grants/, owned by root or the owner"}
	// LoopState is loopd's own state beside the session logs: its record
	// of the owner's jobs' runs (jobs.json).
	LoopState = Entry{Path: "loop", Kind: Dir, Mode: 0o700, Writer: "loopd", Up: true, Owner: Loopd, Files: 0o600,
		Doc: "loopd's own state: jobs.json, each job's next and last runs", Rests: "0700 loopd's"}
	// Metrics is node_exporter's textfile collector directory: `bxctl
	// metrics` writes boxmaker.prom there (atomically), so no role opens a
	// port for a dashboard. Others may list and read it (node_exporter
	// runs as a user of its own); it holds counts, never content.
	Metrics = Entry{Path: "metrics", Kind: Dir, Mode: 0o755, Writer: "bxctl", Up: true, Owner: Owner, Files: 0o644,
		Doc: "boxmaker.prom, the Prometheus textfile bxctl metrics writes (node_exporter's --collector.textfile.directory), and " + AnchorTimeName + ", when bxctl audit anchor last anchored the audit log (loopd reads it for !status)", Rests: "0755 the owner's; the file 0644: figures only, no content"}
	// Attachments holds the files the owner posts with a message (issue
	// 29): gatewayd fetches each from Mattermost and writes it whole or
	// not at all (an unnamed file linked on commit), one directory per
	// session, <session>/<file id>; brokerd reads a text one for
	// read_attachment, which its grants must cover. Nothing else reads
	// them; no role writes them but gatewayd.
	Attachments = Entry{Path: "attachments", Kind: Dir, Mode: fs.ModeSetgid | 0o750, Writer: "gatewayd", Up: true, Owner: Gatewayd, Group: Brokerd, Files: 0o640,
		Doc:   "files posted with the owner's messages, <session>/<file id> (text, or a PDF's extracted text); read through read_attachment",
		Rests: "setgid 0750 gatewayd's, group brokerd's; files 0640: gatewayd writes, brokerd reads, no other role enters"}
	// Images holds the images among those files: gatewayd writes them as
	// it writes attachments/, one directory per session, and loopd reads
	// them into the request for a model that can see. brokerd never
	// reads them (read_attachment is text only).
	Images = Entry{Path: "images", Kind: Dir, Mode: fs.ModeSetgid | 0o750, Writer: "gatewayd", Up: true, Owner: Gatewayd, Group: Loopd, Files: 0o640,
		Doc:   "images posted with the owner's messages, <session>/<file id>; loopd hands them to a model that can see",
		Rests: "setgid 0750 gatewayd's, group loopd's; files 0640: gatewayd writes, loopd reads, no other role enters"}
	// Outbox holds the files post_file attaches to a turn's answer:
	// brokerd copies each decided file here, <session>/<id>, whole or not
	// at all, and gatewayd uploads it to Mattermost. Nothing else reads
	// them.
	Outbox = Entry{Path: "outbox", Kind: Dir, Mode: fs.ModeSetgid | 0o750, Writer: "brokerd", Up: true, Owner: Brokerd, Group: Gatewayd, Files: 0o640,
		Doc:   "files post_file attaches to an answer, <session>/<id>; gatewayd uploads them",
		Rests: "setgid 0750 brokerd's, group gatewayd's; files 0640: brokerd writes, gatewayd reads, no other role enters"}
	Secrets = Entry{Path: "secrets", Kind: Dir, Mode: 0o711, Writer: "bxctl", Up: true, Owner: Owner,
		Doc: "file secrets (file:... refs), one directory per role that holds any", Rests: "0711: entered by name, never listed"}
	GatewaySecrets = secretDir(Gatewayd, "the Mattermost bot token")
	BrokerSecrets  = secretDir(Brokerd, "tool secrets")
	MemorySecrets  = secretDir(Memoryd, "Honcho's key, if any")

	InferRun    = socketDir("infer", Inferproxy, &wire.Infer, Loopd)
	LoopRun     = socketDir("loop", Loopd, &wire.Loop, Gatewayd, Owner)
	BrokerRun   = socketDir("broker", Brokerd, &wire.Broker, Loopd)
	AdminRun    = socketDir("admin", Brokerd, &wire.Admin, Owner)
	GatewayRun  = socketDir("gateway", Gatewayd, &wire.Gateway, Brokerd)
	MemoryRun   = socketDir("memory", Memoryd, &wire.Memory, Loopd)
	MemtoolRun  = socketDir("memtool", Memoryd, &wire.Memtool, Brokerd)
	MemadminRun = socketDir("memadmin", Memoryd, &wire.Memadmin, Owner)
	// MemchatRun is the owner's `!why` and `!forget` from the chat:
	// gatewayd alone may connect, and memoryd serves nothing else there.
	MemchatRun = socketDir("memchat", Memoryd, &wire.Memchat, Gatewayd)
	// GateRun is brokerd's read-only session-state query for memoryd
	// (the clean-turn gate, P23): memoryd alone may connect.
	GateRun = socketDir("gate", Brokerd, &wire.Gate, Memoryd)
	// PodmanRun holds the Podman API service bxctl up runs for brokerd's
	// tool containers (Podman's socket, not one of ours). Rootful Podman
	// runs as root, so the directory is root's, its group brokerd's, and
	// bxctl gives the socket that group once it appears.
	PodmanRun = Entry{Path: "run/podman", Kind: SocketDir, Mode: 0o750, Writer: "bxctl", Up: true, Socket: "podman.sock",
		Owner: Root, Group: Brokerd, Files: 0o660, Accept: []string{Brokerd},
		Doc:   "the Podman API service bxctl up runs for brokerd",
		Rests: "0750 root's, group brokerd's; the socket 0660 root:brokerd (Podman checks no peer)"}
)

func socketDir(pair, listener string, s *wire.Socket, clients ...string) Entry {
	// The group is the first client's; a second client (the owner, for
	// loop.sock) reaches it as root or as a member of that group.
	return Entry{Path: "run/" + pair, Kind: SocketDir, Mode: fs.ModeSetgid | 0o750, Writer: listener, Up: true, Socket: s.Name,
		Owner: listener, Group: clients[0], Files: 0o660, Accept: clients,
		Doc:   s.Name + ", " + listener + "'s socket",
		Rests: "setgid 0750 " + listener + "'s, group " + clients[0] + "'s; socket 0660; SO_PEERCRED accepts only the listed uids"}
}

func secretDir(role, what string) Entry {
	return Entry{Path: "secrets/" + role, Kind: Dir, Mode: 0o700, Writer: "owner", Up: true, Owner: role, Files: 0o600,
		Doc: role + "'s file secrets: " + what, Rests: "0700 " + role + "'s; each secret 0600"}
}

// ConfigFile is role's config entry, config/<role>.toml.
func ConfigFile(role string) *Entry {
	for _, e := range configFiles {
		if e.Path == "config/"+role+".toml" {
			return e
		}
	}
	panic("layout: no config for " + role)
}

var configFiles = func() []*Entry {
	var es []*Entry
	for _, r := range Daemons {
		es = append(es, &Entry{Path: "config/" + r + ".toml", Kind: File, Mode: 0o640, Writer: "owner", Owner: Owner, Group: r,
			Doc: r + "'s config", Rests: "0640, group " + r + "'s: only " + r + " reads it, only the owner writes it"})
	}
	return es
}()

// Table is every entry, parents before children.
var Table = append([]*Entry{&State, &FormatFile, &Run, &Config, &UsersFile}, append(configFiles,
	&Logs, &Sessions, &Grants, &MCP, &Broker, &Audit, &ConsultLog, &Memory, &Journal, &Index, &Gateway, &Jobs, &LoopState, &Metrics, &Proposals, &Attachments, &Images, &Outbox,
	&Secrets, &GatewaySecrets, &BrokerSecrets, &MemorySecrets,
	&InferRun, &LoopRun, &BrokerRun, &AdminRun, &GatewayRun, &MemoryRun, &MemtoolRun, &MemadminRun, &MemchatRun, &GateRun, &PodmanRun)...)

// AnchorTimeName is the textfile in metrics/ that bxctl audit anchor
// writes with the newest anchor's time (audit.WriteAnchorTime).
const AnchorTimeName = "audit_anchor.prom"

// AnchorTimeFile is its path in state directory state.
func AnchorTimeFile(state string) string { return filepath.Join(Metrics.In(state), AnchorTimeName) }

// SocketFor is the socket directory entry that holds s.
func SocketFor(s *wire.Socket) *Entry {
	for _, e := range Table {
		if e.Kind == SocketDir && e.Socket == s.Name {
			return e
		}
	}
	panic("layout: no socket directory for " + s.Name) // every socket has one: TestEverySocketHasADir
}

// In is the absolute paths in state directory state that cover every
// entry of the table but the state directory itself: each entry that no
// other such entry holds (memory/, not memory/edits/journal.jsonl), in
// table order. It is what no tool container may mount (brokerd's
// runner, which refuses any path in or over one): a nested entry needs
// no line of its own, and brokerd, which may not enter memory/ or
// gateway/, could not look at one anyway.
func In(state string) []string {
	var out []string
	for _, e := range Table {
		if e != &State && !inside(e) {
			out = append(out, e.In(state))
		}
	}
	return out
}

// inside is whether another entry than the state directory holds e.
func inside(e *Entry) bool {
	for _, o := range Table {
		if o != &State && o != e && strings.HasPrefix(e.Path, o.Path+"/") {
			return true
		}
	}
	return false
}

// Socket is the path of socket s in state directory state.
func Socket(state string, s *wire.Socket) string { return SocketFor(s).SocketIn(state) }

// Owned is every entry role owns or whose group is role's: what role
// checks at start-up besides the directories above them.
func Owned(role string) []*Entry {
	var es []*Entry
	for _, e := range Table {
		if e.Owner == role || e.Group == role {
			es = append(es, e)
		}
	}
	return es
}

// AcceptUIDs is the uids s's listener accepts under u.
func AcceptUIDs(u Users, s *wire.Socket) []uint32 {
	var uids []uint32
	for _, r := range SocketFor(s).Accept {
		if id := u.Of(r).UID; !slices.Contains(uids, id) {
			uids = append(uids, id)
		}
	}
	return uids
}
