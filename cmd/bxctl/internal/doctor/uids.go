package doctor

import (
	"fmt"
	"slices"
	"strings"

	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// roleUIDs checks that no uid is named for two roles: in
// config/users.toml (package layout refuses a shared id as it loads it)
// and in the owner_uid keys (brokerd's, loopd's [jobs]), each of which
// names the owner. Each listener's peers are the table's, from
// users.toml (no config names them: the old allow_uids keys are refused
// by the roles' loaders, so a config holding one is a doctor-config
// problem). An owner_uid that is a role's uid would let that role write
// what runs as the owner's. Without users.toml every listener accepts
// only its own user: the single-user mode of bxctl up run as a normal
// user, reported as such.
func (a *auditor) roleUIDs(in *install) {
	named := map[uint32][]naming{}
	add := func(roles, key string, uids []uint32) {
		for _, u := range uids {
			named[u] = append(named[u], naming{roles, key})
		}
	}
	users, err := layout.LoadUsers(in.state)
	if err != nil {
		a.add("doctor-role-uids", Problem, "%v", err)
		return
	}
	if !users.Single() {
		// config/users.toml: each role's own uid, which no owner_uid may
		// name for another role (the owner may be root; no role may).
		for _, r := range layout.Daemons {
			add(r, "config/users.toml", []uint32{users.Of(r).UID})
		}
	}
	if in.has("brokerd") && in.broker.OwnerUID != nil {
		add("owner", "brokerd.toml owner_uid", []uint32{*in.broker.OwnerUID})
	}
	if in.has("loopd") && in.loop.Jobs.OwnerUID != nil {
		add("owner", "loopd.toml [jobs] owner_uid", []uint32{*in.loop.Jobs.OwnerUID})
	}
	// With a user per role each daemon refuses an owner_uid other than
	// users.toml's owner (pkg/host/daemon Flags.OwnerUID): so does doctor.
	var problems []string
	if !users.Single() {
		owner := users.Of(layout.Owner).UID
		for _, o := range []struct {
			role, key string
			uid       *uint32
		}{{"brokerd", "brokerd.toml owner_uid", in.broker.OwnerUID}, {"loopd", "loopd.toml [jobs] owner_uid", in.loop.Jobs.OwnerUID}} {
			if in.has(o.role) && o.uid != nil && *o.uid != owner {
				problems = append(problems, fmt.Sprintf("%s = %d is not config/users.toml's owner (uid %d): %s refuses to start on it (runbook layout-owner-uid)", o.key, *o.uid, owner, o.role))
			}
		}
	}
	if len(named) == 0 {
		a.add("doctor-role-uids", OK, "single-user mode: no config/users.toml and no owner_uid, so every listener accepts only its own user and the roles are kept apart by code and directory checks alone (bxctl up as root gives each role its own)")
		return
	}
	uids := make([]uint32, 0, len(named))
	for u := range named {
		uids = append(uids, u)
	}
	slices.Sort(uids)
	for _, u := range uids {
		if u == 0 && !ownerOnly(named[u]) {
			problems = append(problems, fmt.Sprintf("uid 0 is named by %s: no role runs as root", keys(named[u], func(n naming) string { return n.key })))
			continue
		}
		roles := map[string]bool{}
		for _, n := range named[u] {
			roles[n.role] = true
		}
		if len(roles) > 1 && !compatible(roles) {
			problems = append(problems, fmt.Sprintf("uid %d is named for more than one role: %s",
				u, keys(named[u], func(n naming) string { return n.key + " (" + n.role + ")" })))
		}
	}
	if len(problems) > 0 {
		a.add("doctor-role-uids", Problem, "%s", strings.Join(problems, "; "))
		return
	}
	a.add("doctor-role-uids", OK, "%d uids named in config/users.toml and the owner_uid keys, each for one role", len(uids))
}

// naming is one config key naming a uid for a role.
type naming struct{ role, key string }

// ownerOnly is whether every naming is the owner's (loop.sock's list
// may mean the owner): the owner may be root (bxctl up as root), no role
// may.
func ownerOnly(ns []naming) bool {
	for _, n := range ns {
		if n.role != "owner" && n.role != "gatewayd|owner" {
			return false
		}
	}
	return true
}

// compatible is whether the roles one uid is named for can be one role:
// loop.sock's list names gatewayd or the owner.
func compatible(roles map[string]bool) bool {
	var plain []string
	for r := range roles {
		if r != "gatewayd|owner" {
			plain = append(plain, r)
		}
	}
	switch {
	case len(plain) > 1:
		return false
	case len(plain) == 1 && roles["gatewayd|owner"]:
		return plain[0] == "gatewayd" || plain[0] == "owner"
	}
	return true
}

func keys[T any](list []T, f func(T) string) string {
	out := make([]string, len(list))
	for i, x := range list {
		out[i] = f(x)
	}
	return strings.Join(out, ", ")
}
