package layout

import (
	"io/fs"
	"testing"
)

// TestUmask: each role's umask keeps exactly the bits its table entries
// need: loopd's session logs are group-readable (memoryd reindexes
// them), brokerd's grant proposals too (the owner's group reads them in
// the setgid proposals/), every other role's files are its own alone,
// and with one user nothing is shared.
func TestUmask(t *testing.T) {
	per := DefaultUsers(ID{UID: 1000, GID: 1000})
	one := SingleUser(ID{UID: 1000, GID: 1000})
	for _, c := range []struct {
		role string
		u    Users
		want fs.FileMode
	}{
		{Memoryd, per, 0o077}, {Brokerd, per, 0o027}, {Brokerd, one, 0o077}, {Gatewayd, per, 0o027}, {Gatewayd, one, 0o077},
		{Inferproxy, per, 0o077}, {Loopd, per, 0o027}, {Loopd, one, 0o077},
	} {
		if got := Umask(c.role, c.u); got != c.want {
			t.Errorf("Umask(%s, single %v) = %#o, want %#o", c.role, c.u.Single(), got, c.want)
		}
	}
	// No entry a role writes loses a bit the table gives it.
	for _, e := range Table {
		if e.Kind == SocketDir || e.Writer == Owner || e.Writer == "owner" || e.Writer == "bxctl" {
			continue
		}
		m := Umask(e.Writer, per)
		if e.ModeFor(per)&fs.ModePerm&m != 0 || (e.Kind == Dir && e.FilesFor(per)&m != 0) {
			t.Errorf("%s: %s's umask %#o clears a bit of its mode %v or its files' %v", e.Path, e.Writer, m, e.ModeFor(per), e.FilesFor(per))
		}
	}
}
