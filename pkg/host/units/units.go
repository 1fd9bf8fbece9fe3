package units

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// The placeholders a unit's values may carry (docs/units.md);
// each installer substitutes them and nothing else does.
const (
	Podman    = "@podman@" // the podman binary
	State     = "@state@"  // the state directory
	ConfigDir = "@config@" // the directory of the role configs: @state@/config, which the daemons check against the table
	// Only in the first configs' text (Deployment.Configs), never in a unit:
	Llama = "@llama@" // llama-server's host:port (inferproxy's upstream)
	Model = "@model@" // the model's name (loopd's [model])
)

// Image is the placeholder of role's image ID (sha256:<64 hex>).
func Image(role string) string { return "@image:" + role + "@" }

// Bin is the placeholder of a binary on the host, for a role that runs on
// the host's root filesystem (brokerd).
func Bin(name string) string { return "@bin:" + name + "@" }

// Root is the placeholder of the directory holding role's image's root
// filesystem, unpacked and read-only: the unit's RootDirectory=.
func Root(role string) string { return "@root:" + role + "@" }

// Net is the placeholder of the addresses role may reach
// (IPAddressAllow=, space-separated addresses or prefixes; empty: none).
func Net(role string) string { return "@net:" + role + "@" }

// CredentialPath is the placeholder of the encrypted credential file
// named name (systemd-creds encrypt's output).
func CredentialPath(name string) string { return "@credential:" + name + "@" }

// Key is one key of a unit file section with its values in order; a key
// with several values is written once per value, and the value "" resets
// a list (CapabilityBoundingSet= empties the set).
type Key struct {
	Name   string
	Values []string
}

// Section is one [Section] of a unit file.
type Section struct {
	Name string
	Keys []Key
}

// Unit is one systemd unit of the table.
type Unit struct {
	Name string // boxmaker-<role>.service
	Role string
	// ExposureMax is the highest `systemd-analyze security` exposure
	// allowed, in tenths (2.0 is 20); the VM test enforces it.
	ExposureMax int
	Sections    []Section
}

// Values is the unit's values of key in section (nil if it has none).
func (u *Unit) Values(section, key string) []string {
	for _, s := range u.Sections {
		if s.Name != section {
			continue
		}
		for _, k := range s.Keys {
			if k.Name == key {
				return k.Values
			}
		}
	}
	return nil
}

// Text is the unit file.
func (u *Unit) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s: generated from pkg/host/units (Boxmaker's unit table); do not edit.\n", u.Name)
	for i, s := range u.Sections {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "[%s]\n", s.Name)
		for _, k := range s.Keys {
			for _, v := range k.Values {
				fmt.Fprintf(&b, "%s=%s\n", k.Name, v)
			}
		}
	}
	return b.String()
}

// Credential is one encrypted systemd credential a role loads.
type Credential struct {
	Role string
	Name string // the credential's name; the role's config refers to it as credential:<name>
	Doc  string
	// Optional is whether the role runs without it: its unit declares
	// it only when the owner gives one (see [Table]). A
	// LoadCredentialEncrypted= whose file is missing fails the unit, and
	// memoryd runs with Honcho off, or with a Honcho whose auth is off,
	// and no key (docs/decisions.md).
	Optional bool
}

// The credentials' names.
const (
	MattermostToken = "mattermost-token"
	HonchoKey       = "honcho-key"
)

// Credentials is every credential of the deployment, in the order an
// installer reads them.
var Credentials = []Credential{
	{Role: layout.Gatewayd, Name: MattermostToken, Doc: "the Mattermost bot token"},
	{Role: layout.Memoryd, Name: HonchoKey, Optional: true,
		Doc: `Honcho's API key (only with memoryd.toml's [honcho] key = "credential:honcho-key")`},
}

// Load is c's LoadCredentialEncrypted= value in its role's unit.
func (c Credential) Load() string { return c.Name + ":" + CredentialPath(c.Name) }

// CredentialOf is the credential named name.
func CredentialOf(name string) (Credential, bool) {
	for _, c := range Credentials {
		if c.Name == name {
			return c, true
		}
	}
	return Credential{}, false
}

// spec is what the table says of one role beyond package layout.
type spec struct {
	role string
	net  bool // IP traffic to Net(role)'s addresses; otherwise no network namespace of the host's at all
	tls  bool // speaks TLS (its image holds the CA bundle)
	// host is whether it runs on the host's root filesystem rather than
	// its image's (brokerd: its runner pins granted host paths by inode
	// and hands them to Podman, so it must see the host's tree as it is).
	host     bool
	exposure int // tenths
	doc      string
}

// specs are the roles in start order (layout.Daemons). The exposure
// bounds are what systemd 252 measured in the VM test (docs/units.md):
// a change that loosens a unit raises its figure and fails that test.
var specs = []spec{
	{role: layout.Inferproxy, net: true, exposure: 11, doc: "byte forwarder to llama-server"},
	{role: layout.Memoryd, net: true, tls: true, exposure: 10, doc: "memory files, recall index, Honcho sync"},
	{role: layout.Brokerd, host: true, exposure: 4, doc: "decides, runs and audits tool calls"},
	{role: layout.Loopd, exposure: 3, doc: "the conversation and prompt assembly"},
	{role: layout.Gatewayd, net: true, tls: true, exposure: 11, doc: "Mattermost to loopd, approval posts"},
}

// RuntimeDir is role's user's runtime directory, its user manager's
// (/run/user/<uid>): its D-Bus socket (bus) and the manager's private
// socket (systemd/private) start services as that user outside any unit
// of the table, so no unit may see it but for [PodmanDir].
func RuntimeDir(role string) string {
	return fmt.Sprintf("/run/user/%d", layout.DefaultUsers(layout.ID{}).Of(role).UID)
}

// UserManager is role's user's manager, the system unit that owns its
// runtime directory and its Podman.
func UserManager(role string) string {
	return fmt.Sprintf("user@%d.service", layout.DefaultUsers(layout.ID{}).Of(role).UID)
}

// PodmanDir is the one directory of brokerd's [RuntimeDir] its unit
// sees: its Podman socket's (podman.socket's), bound read-only over an
// empty read-only tmpfs (connecting to a socket needs no writable mount).
func PodmanDir() string { return filepath.Dir(PodmanSocket()) }

// HostHidden is what a unit on the host's root filesystem (brokerd's)
// has made inaccessible beyond the layout's entries: the system bus.
var HostHidden = []string{"-/run/dbus"}

// UnitName is role's unit.
func UnitName(role string) string { return "boxmaker-" + role + ".service" }

// UserName is role's system user (and group).
func UserName(role string) string {
	switch role {
	case layout.Owner, layout.Root:
		return "root"
	}
	return "boxmaker-" + role
}

// TLS reports whether role speaks TLS, so its image holds the CA bundle.
func TLS(role string) bool {
	for _, s := range specs {
		if s.role == role {
			return s.tls
		}
	}
	return false
}

// Table is every role's unit, in start order, each declaring its role's
// credentials that are not optional and those of the optional ones named
// in given (the ones the owner gave). Without given it is the table of
// deploy/units and modules/deployment.json. A name in given that is not
// an optional credential is a programming error: it panics.
func Table(given ...string) []Unit {
	for _, n := range given {
		if c, ok := CredentialOf(n); !ok || !c.Optional {
			panic("units: " + n + " is not an optional credential")
		}
	}
	var out []Unit
	for _, s := range specs {
		out = append(out, unit(s, given))
	}
	return out
}

// Of is role's unit, with the optional credentials of given as [Table].
func Of(role string, given ...string) Unit {
	for _, u := range Table(given...) {
		if u.Role == role {
			return u
		}
	}
	panic("units: no unit for " + role)
}

func unit(s spec, given []string) Unit {
	var after []string
	for _, e := range layout.Table {
		if e.Kind == layout.SocketDir && slices.Contains(e.Accept, s.role) && started(e.Owner, s.role) {
			after = append(after, UnitName(e.Owner))
		}
	}
	after = slices.Compact(after)
	wants := slices.Clone(after)
	wantedBy := []string{"multi-user.target"}
	var bindsTo []string
	if s.host {
		// Its Podman is its user's rootless service, on its user manager's
		// socket (linger starts the manager at boot). Bound to the
		// manager, not just wanting it: a runtime directory made anew
		// while it runs is mounted into its namespace over the empty
		// tmpfs, bus and all (measured in checks/vm), so it stops with
		// the manager and starts again with it, in a fresh namespace.
		m := UserManager(s.role)
		after = append(after, m)
		bindsTo = []string{m}
		wantedBy = append(wantedBy, m)
	}
	ul := []Key{
		{"Description", []string{"Boxmaker " + s.role + ": " + s.doc}},
		{"Documentation", []string{"https://wntrmute.dev/boxmaker/docs/units.md"}},
	}
	if len(after) > 0 {
		ul = append(ul, Key{"After", after})
	}
	if len(wants) > 0 {
		ul = append(ul, Key{"Wants", wants})
	}
	if bindsTo != nil {
		ul = append(ul, Key{"BindsTo", bindsTo})
	}

	exec := "/bin/" + s.role
	if s.host {
		exec = Bin(s.role)
	}
	svc := []Key{
		{"Type", []string{"exec"}},
		{"User", []string{UserName(s.role)}},
		{"Group", []string{UserName(s.role)}},
		{"ExecStart", []string{exec + " -config " + ConfigDir + "/" + s.role + ".toml -state " + State}},
		// A role killed by a signal or failing is restarted; one that
		// refused to start (exit 2: its config or the layout is wrong)
		// is not, since a restart cannot fix it.
		{"Restart", []string{"on-failure"}},
		{"RestartSec", []string{"2s"}},
		{"RestartPreventExitStatus", []string{"2"}},
	}
	if !s.host {
		svc = append(svc, Key{"RootDirectory", []string{Root(s.role)}}, Key{"MountAPIVFS", []string{"yes"}})
	}
	binds := []string{State}
	if s.net && !s.host {
		binds = append(binds, "-/etc/resolv.conf", "-/etc/hosts")
	}
	hidden := paths(Hidden(s.role), "-")
	if s.host {
		// Of the host's /run, only its Podman socket's directory: its
		// user manager's bus and private socket would start transient
		// services outside this sandbox (systemd-run --user), and the
		// system bus is no business of its.
		svc = append(svc, Key{"TemporaryFileSystem", []string{RuntimeDir(s.role) + ":ro"}})
		binds = append(binds, "-"+PodmanDir())
		hidden = append(hidden, HostHidden...)
	}
	svc = append(svc,
		Key{"BindReadOnlyPaths", binds},
		// A bind of its own over each entry the role writes: inside the
		// read-only bind of the state directory, ReadWritePaths= would
		// not lift the read-only flag of that mount.
		Key{"BindPaths", paths(Writable(s.role), "")},
		Key{"InaccessiblePaths", hidden},
	)
	var load []string
	for _, c := range Credentials {
		if c.Role == s.role && (!c.Optional || slices.Contains(given, c.Name)) {
			load = append(load, c.Load())
		}
	}
	if load != nil {
		svc = append(svc, Key{"LoadCredentialEncrypted", load})
	}
	svc = append(svc, network(s)...)
	svc = append(svc, hardening(s)...)
	return Unit{Name: UnitName(s.role), Role: s.role, ExposureMax: s.exposure, Sections: []Section{
		{"Unit", ul},
		{"Service", svc},
		{"Install", []Key{{"WantedBy", wantedBy}}},
	}}
}

// started is whether listener starts before client (layout.Daemons'
// order): a client is ordered after the listeners started before it, so
// the order has no cycle (brokerd's courier reaches gatewayd, which
// starts last, and copes with its absence).
func started(listener, client string) bool {
	return slices.Index(layout.Daemons, listener) >= 0 && slices.Index(layout.Daemons, listener) < slices.Index(layout.Daemons, client)
}

func paths(es []*layout.Entry, prefix string) []string {
	var out []string
	for _, e := range es {
		out = append(out, prefix+State+"/"+e.Path)
	}
	return out
}

// network is the unit's network: none at all, or IP to its addresses only.
func network(s spec) []Key {
	if !s.net {
		return []Key{
			{"PrivateNetwork", []string{"yes"}},
			{"RestrictAddressFamilies", []string{"AF_UNIX"}},
			{"IPAddressDeny", []string{"any"}},
		}
	}
	return []Key{
		{"RestrictAddressFamilies", []string{"AF_UNIX AF_INET AF_INET6"}},
		{"IPAddressDeny", []string{"any"}},
		{"IPAddressAllow", []string{Net(s.role)}},
		// Outbound only: no role listens on an IP socket.
		{"SocketBindDeny", []string{"any"}},
	}
}

// hardening is the sandbox every role tolerates. Not PrivateUsers= nor
// DynamicUser=: each listener checks its peers' uids (SO_PEERCRED) and
// each daemon the owners and groups of its state entries, and in a user
// namespace of its own every other role's uid and gid reads as nobody.
func hardening(s spec) []Key {
	home := "yes"
	if s.host {
		// brokerd pins granted paths, which may lie under /home.
		home = "read-only"
	}
	return []Key{
		{"NoNewPrivileges", []string{"yes"}},
		{"ProtectSystem", []string{"strict"}},
		{"ProtectHome", []string{home}},
		{"PrivateTmp", []string{"yes"}},
		{"PrivateDevices", []string{"yes"}},
		{"PrivateIPC", []string{"yes"}},
		{"ProtectKernelTunables", []string{"yes"}},
		{"ProtectKernelModules", []string{"yes"}},
		{"ProtectKernelLogs", []string{"yes"}},
		{"ProtectControlGroups", []string{"yes"}},
		{"ProtectClock", []string{"yes"}},
		{"ProtectHostname", []string{"yes"}},
		{"ProtectProc", []string{"invisible"}},
		{"ProcSubset", []string{"pid"}},
		{"RestrictNamespaces", []string{"yes"}},
		{"RestrictRealtime", []string{"yes"}},
		{"RestrictSUIDSGID", []string{"yes"}},
		{"LockPersonality", []string{"yes"}},
		{"MemoryDenyWriteExecute", []string{"yes"}},
		{"SystemCallArchitectures", []string{"native"}},
		{"SystemCallFilter", []string{"@system-service", "~@privileged @resources"}},
		// A filtered call fails with EPERM rather than killing the role:
		// Go's runtime probes a few (setrlimit at start) and copes.
		{"SystemCallErrorNumber", []string{"EPERM"}},
		{"CapabilityBoundingSet", []string{""}},
		{"AmbientCapabilities", []string{""}},
		// 0027, not 0077: session logs are 0640 for memoryd and sockets
		// 0660 for their clients' group (package layout).
		{"UMask", []string{"0027"}},
		{"DevicePolicy", []string{"closed"}},
		{"KeyringMode", []string{"private"}},
		{"RemoveIPC", []string{"yes"}},
	}
}

// Writable is the layout entries role writes (directories and socket
// directories, none inside another of them): its unit's BindPaths.
func Writable(role string) []*layout.Entry {
	var out []*layout.Entry
	for _, e := range layout.Table {
		if e.Writer != role || e.Kind == layout.File {
			continue
		}
		if slices.ContainsFunc(out, func(o *layout.Entry) bool { return strings.HasPrefix(e.Path, o.Path+"/") }) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// visible is whether role has any business with e: it owns it, it is
// its group, it connects to it, it is users.toml or the format file
// (every role reads them),
// or it holds an entry that is visible.
func visible(e *layout.Entry, role string) bool {
	if e == &layout.UsersFile || e == &layout.FormatFile || e.Owner == role || e.Group == role || slices.Contains(e.Accept, role) {
		return true
	}
	for _, o := range layout.Table {
		if o != e && (e.Path == "." || strings.HasPrefix(o.Path, e.Path+"/")) && visible(o, role) {
			return true
		}
	}
	return false
}

// Hidden is the layout entries role has no business with, none inside
// another of them: its unit's InaccessiblePaths.
func Hidden(role string) []*layout.Entry {
	var out []*layout.Entry
	for _, e := range layout.Table {
		if visible(e, role) {
			continue
		}
		if slices.ContainsFunc(out, func(o *layout.Entry) bool { return strings.HasPrefix(e.Path, o.Path+"/") }) {
			continue
		}
		out = append(out, e)
	}
	return out
}
