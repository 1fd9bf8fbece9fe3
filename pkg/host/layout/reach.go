package layout

import (
	"io/fs"
	"path"
	"slices"
)

// A Cell is one thing a role may or may not do to the state directory or
// the network: the containment table's unit. checks/contain runs a probe
// under each role's uid, gid and namespaces, does every cell's operation,
// and compares what happened with [Row].
type Cell struct {
	Path  string // relative to the state directory; "" for the network
	Op    string // one of the Op constants
	Reach bool   // whether the table lets the role do it
}

// The operations of a cell.
const (
	OpEnter   = "enter"   // a directory: resolve a path through it
	OpList    = "list"    // a directory: read its names
	OpCreate  = "create"  // a directory: make a file in it
	OpRead    = "read"    // a file: open it for reading
	OpWrite   = "write"   // a file: open it for writing
	OpConnect = "connect" // a socket: connect and be kept by the listener
	OpNetLo   = "tcp-loopback"
	OpNetHost = "tcp-host" // a TCP listener on a non-loopback address of the host
)

// Sample is the file the containment test puts in each directory whose
// files the table describes, standing in for what its writer keeps there.
const Sample = "sample"

// NoNetwork are the roles in a network namespace of their own with
// loopback only (`bxctl up` as root; --network=none in containers).
var NoNetwork = []string{Loopd}

// Row is role's row of the containment table under u (a user per role):
// every cell, and whether the table lets role do it. A file's cell is
// decided by the mode bits along its path for role's uid and its one gid
// (roles have no supplementary groups); a socket's also by its
// listener's accepted uids.
func Row(u Users, role string) []Cell {
	id := u.Of(role)
	var cells []Cell
	add := func(p, op string, ok bool) { cells = append(cells, Cell{p, op, ok}) }
	for _, e := range Table {
		if e == &Journal {
			continue // inside memory/edits, which memoryd makes: memory/'s sample stands for it
		}
		pass := enters(u, id, e)
		switch e.Kind {
		case File:
			add(e.Path, OpRead, pass && may(u, id, e, e.ModeFor(u), 4))
			add(e.Path, OpWrite, pass && may(u, id, e, e.ModeFor(u), 2))
		case Dir:
			self := pass && may(u, id, e, e.ModeFor(u), 1)
			add(e.Path, OpEnter, self)
			add(e.Path, OpList, pass && may(u, id, e, e.ModeFor(u), 4))
			add(e.Path, OpCreate, self && may(u, id, e, e.ModeFor(u), 2))
			if e.Files != 0 && e != &Config {
				f := SampleEntry(e)
				add(f.Path, OpRead, self && may(u, id, f, f.Mode, 4))
				add(f.Path, OpWrite, self && may(u, id, f, f.Mode, 2))
			}
		case SocketDir:
			self := pass && may(u, id, e, e.ModeFor(u), 1)
			add(e.Path, OpEnter, self)
			sock := &Entry{Owner: e.Owner, Group: e.Group}
			if e == &PodmanRun {
				sock.Owner = Root
			}
			add(path.Join(e.Path, e.Socket), OpConnect, self && may(u, id, sock, e.FilesFor(u), 2) && slices.Contains(e.Accept, role))
		}
	}
	net := !slices.Contains(NoNetwork, role)
	add("", OpNetLo, net)
	add("", OpNetHost, net)
	return cells
}

// SampleEntry is the [Sample] file in Dir entry e, with the owner, group
// and mode the table gives e's files.
func SampleEntry(e *Entry) *Entry {
	f := &Entry{Path: path.Join(e.Path, Sample), Kind: File, Mode: e.Files, Owner: e.Owner, Group: e.Group}
	if e == &Grants || e == &MCP || e == &Logs {
		f.Owner = Owner
	}
	return f
}

// enters reports whether id may pass every table directory above e.
func enters(u Users, id ID, e *Entry) bool {
	if e.Path == "." {
		return true
	}
	for d := path.Dir(e.Path); ; d = path.Dir(d) {
		if p := byPath(d); p != nil && !may(u, id, p, p.ModeFor(u), 1) {
			return false
		}
		if d == "." {
			return true
		}
	}
}

func byPath(p string) *Entry {
	for _, e := range Table {
		if e.Path == p {
			return e
		}
	}
	return nil
}

// may reports whether id has the permission bit want (4 read, 2 write,
// 1 execute) on a file of e's owner and group with mode m.
func may(u Users, id ID, e *Entry, m fs.FileMode, want fs.FileMode) bool {
	uid, gid := e.IDs(u)
	switch {
	case id.UID == uid:
		return m&(want<<6) != 0
	case id.GID == gid:
		return m&(want<<3) != 0
	default:
		return m&want != 0
	}
}
