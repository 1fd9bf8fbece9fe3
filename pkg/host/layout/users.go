package layout

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/BurntSushi/toml"
)

// The roles the table names, in the order the threat model lists them.
// Owner is the person who runs bxctl (admin.sock and memadmin.sock are
// theirs); Root is the Podman service bxctl up runs for brokerd, which
// rootful Podman needs (decisions.md, 2026-12-01).
const (
	Owner      = "owner"
	Root       = "root"
	Gatewayd   = "gatewayd"
	Loopd      = "loopd"
	Inferproxy = "inferproxy"
	Brokerd    = "brokerd"
	Memoryd    = "memoryd"
)

// Daemons are the roles that run as users of their own, in start order.
var Daemons = []string{Inferproxy, Memoryd, Brokerd, Loopd, Gatewayd}

// ID is one role's numeric user and group. No system user need exist.
type ID struct {
	UID uint32 `toml:"uid"`
	GID uint32 `toml:"gid"`
}

// DefaultBase is where the default role ids start: gatewayd is base+1,
// loopd base+2, inferproxy base+3, brokerd base+4, memoryd base+5, each
// its uid and gid alike. They sit above Debian's dynamic range (up to
// 60999) and below nobody (65534).
const DefaultBase = 61000

// UsersFile is where the ids live: config/users.toml. Its presence is
// what puts a state directory in per-role mode.
var UsersFile = Entry{Path: "config/users.toml", Kind: File, Mode: 0o644, Writer: Owner, Owner: Owner,
	Doc: "each role's uid and gid ([role] uid = N, gid = N); present means each role runs as its own user", Rests: "0644 the owner's: every role reads it, only the owner writes it"}

// Users maps each role to its ids. The zero Users is invalid; get one
// from [SingleUser], [DefaultUsers] or [LoadUsers].
type Users struct {
	ids    map[string]ID
	single bool
}

// SingleUser is the mode of a state directory without users.toml: every
// role (and root's Podman service) is the owner, id.
func SingleUser(id ID) Users {
	u := Users{ids: map[string]ID{}, single: true}
	for _, r := range append([]string{Owner, Root}, Daemons...) {
		u.ids[r] = id
	}
	return u
}

// DefaultUsers is per-role mode with the default ids and owner as the
// owner.
func DefaultUsers(owner ID) Users {
	u := Users{ids: map[string]ID{Owner: owner, Root: {}}}
	for i, r := range []string{Gatewayd, Loopd, Inferproxy, Brokerd, Memoryd} {
		n := uint32(DefaultBase + 1 + i)
		u.ids[r] = ID{n, n}
	}
	return u
}

// Single reports whether every role is one user.
func (u Users) Single() bool { return u.single }

// Of is role's ids; it panics on a role the table does not name (a
// programming error: every role in the table is in every Users).
func (u Users) Of(role string) ID {
	id, ok := u.ids[role]
	if !ok {
		panic("layout: no ids for role " + role)
	}
	return id
}

// Text is users.toml's text for u.
func (u Users) Text() string {
	s := "# Each role's numeric uid and gid (bxctl up wrote the defaults; yours to edit,\n# then restart). No two roles may share a uid or a gid; see docs/threat-model.md.\n"
	for _, r := range append([]string{Owner}, Daemons...) {
		id := u.ids[r]
		s += fmt.Sprintf("\n[%s]\nuid = %d\ngid = %d\n", r, id.UID, id.GID)
	}
	return s
}

// ParseUsers parses users.toml's text strictly: every key known, every
// daemon named, no uid or gid shared by two roles, none of the daemons
// root. A missing [owner] is root.
func ParseUsers(text, name string) (Users, error) {
	var f map[string]ID
	md, err := toml.Decode(text, &f)
	if err != nil {
		return Users{}, fmt.Errorf("users %s: %v; see docs/runbook.md#layout-users", name, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		return Users{}, fmt.Errorf("users %s: unknown key %s; see docs/runbook.md#layout-users", name, und[0])
	}
	u := Users{ids: map[string]ID{Owner: {}, Root: {}}}
	for r, id := range f {
		if r != Owner && !slices.Contains(Daemons, r) {
			return Users{}, fmt.Errorf("users %s: [%s] is not a role; see docs/runbook.md#layout-users", name, r)
		}
		u.ids[r] = id
	}
	uids, gids := map[uint32]string{}, map[uint32]string{}
	for _, r := range append([]string{Owner}, Daemons...) {
		id, ok := u.ids[r]
		if !ok {
			return Users{}, fmt.Errorf("users %s: no [%s]; see docs/runbook.md#layout-users", name, r)
		}
		if r != Owner && (id.UID == 0 || id.GID == 0) {
			return Users{}, fmt.Errorf("users %s: %s is root; see docs/runbook.md#layout-users", name, r)
		}
		if o, dup := uids[id.UID]; dup {
			return Users{}, fmt.Errorf("users %s: %s and %s share uid %d; see docs/runbook.md#layout-uid-shared", name, o, r, id.UID)
		}
		if o, dup := gids[id.GID]; dup {
			return Users{}, fmt.Errorf("users %s: %s and %s share gid %d; see docs/runbook.md#layout-uid-shared", name, o, r, id.GID)
		}
		uids[id.UID], gids[id.GID] = r, r
	}
	return u, nil
}

// LoadUsers reads state's users.toml, or returns [SingleUser] of this
// process's ids when there is none. The file must be a regular file
// (not a link) that only root or the owner can write.
func LoadUsers(state string) (Users, error) {
	p := UsersFile.In(state)
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return SingleUser(ID{uint32(os.Geteuid()), uint32(os.Getegid())}), nil
	}
	if err != nil {
		return Users{}, fmt.Errorf("users: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return Users{}, fmt.Errorf("users %s is a symbolic link or not a regular file; see docs/runbook.md#layout-link", p)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return Users{}, fmt.Errorf("users %s has mode %04o: others can write it; see docs/runbook.md#layout-writable", p, fi.Mode().Perm())
	}
	b, err := os.ReadFile(filepath.Clean(p))
	if err != nil {
		return Users{}, fmt.Errorf("users: %w", err)
	}
	u, err := ParseUsers(string(b), p)
	if err != nil {
		return Users{}, err
	}
	if o := statOf(fi).Uid; o != 0 && o != u.Of(Owner).UID {
		return Users{}, fmt.Errorf("users %s is owned by uid %d, not root or the owner; see docs/runbook.md#layout-owner", p, o)
	}
	return u, nil
}
