package doctor

import (
	"fmt"
	"slices"
	"strings"

	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// roleUIDs checks that no uid is named for two roles: in
// config/users.toml (package layout refuses a shared id as it loads it),
// in the lists of peers each listener accepts (allow_uids and friends,
// SO_PEERCRED) and in brokerd's owner_uid, each of which names the uid of
// a known role. A uid that one list names as
// loopd's and another as the owner's would let that role through the
// owner's door (admin.sock, memadmin.sock). Empty lists mean each
// listener's own user: the single-user mode of bxctl up run as a normal
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
		// config/users.toml: each role's own uid, which no allow list may
		// name for another role (the owner may be root; no role may).
		for _, r := range layout.Daemons {
			add(r, "config/users.toml", []uint32{users.Of(r).UID})
		}
	}
	if in.has("inferproxy") {
		add("loopd", "inferproxy.toml allow_uids", in.infer.AllowUIDs)
	}
	if in.has("loopd") {
		add("gatewayd|owner", "loopd.toml allow_uids", in.loop.AllowUIDs) // loop.sock has two clients
	}
	if in.has("brokerd") {
		add("loopd", "brokerd.toml broker_allow_uids", in.broker.BrokerAllowUIDs)
		add("owner", "brokerd.toml admin_allow_uids", in.broker.AdminAllowUIDs)
		add("gatewayd", "brokerd.toml gateway_allow_uids", in.broker.GatewayAllowUIDs)
		add("memoryd", "brokerd.toml gate_allow_uids", in.broker.GateAllowUIDs)
		if in.broker.OwnerUID != nil {
			add("owner", "brokerd.toml owner_uid", []uint32{*in.broker.OwnerUID})
		}
	}
	if in.has("memoryd") {
		add("loopd", "memoryd.toml memory_allow_uids", in.mem.MemoryAllowUIDs)
		add("brokerd", "memoryd.toml memtool_allow_uids", in.mem.MemtoolAllowUIDs)
		add("owner", "memoryd.toml admin_allow_uids", in.mem.AdminAllowUIDs)
		add("gatewayd", "memoryd.toml chat_allow_uids", in.mem.ChatAllowUIDs)
		add("brokerd", "memoryd.toml gate_listener_uids", in.mem.GateListenerUIDs)
	}
	if in.gateway != nil {
		add("brokerd", "gatewayd.toml allow_uids", in.gateway.AllowUIDs)
	}
	if len(named) == 0 {
		a.add("doctor-role-uids", OK, "single-user mode: no config/users.toml and no allow list names a role's uid, so every listener accepts only its own user and the roles are kept apart by code and directory checks alone (bxctl up as root gives each role its own)")
		return
	}
	uids := make([]uint32, 0, len(named))
	for u := range named {
		uids = append(uids, u)
	}
	slices.Sort(uids)
	var problems []string
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
	a.add("doctor-role-uids", OK, "%d uids named in config/users.toml and the allow lists, each for one role", len(uids))
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
