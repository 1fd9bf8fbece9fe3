package layout

import "io/fs"

// Umask is the file-creation mask role runs under with users u: it
// clears every permission bit that no file or directory role writes
// (its Dir and File entries, and the files in them) has in the table.
// A file a role creates through a library that picks its own mode
// (SQLite makes a database, and its -wal and -shm files, 0644 less the
// umask) then has no bit the table denies it from its first byte.
// Socket directories are left out: package sockets sets their modes and
// the socket's explicitly after making them, so a tighter umask there
// only narrows the moment before.
func Umask(role string, u Users) fs.FileMode {
	var allowed fs.FileMode
	for _, e := range Table {
		if e.Writer != role || e.Kind == SocketDir {
			continue
		}
		allowed |= e.ModeFor(u) & fs.ModePerm
		if e.Kind == Dir {
			allowed |= e.FilesFor(u) & fs.ModePerm
		}
	}
	// The owner's own bits are never masked: a role must be able to use
	// what it made.
	return fs.ModePerm &^ (allowed | 0o700)
}
