package units

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// Audit checks u against the package's invariants and returns one line
// per breach (none for every unit of [Table]; the tests plant each
// breach). bxctl install audits every unit before it writes one.
func Audit(u *Unit) []string {
	var bad []string
	want := func(key, value string) {
		if got := u.Values("Service", key); !slices.Equal(got, []string{value}) {
			bad = append(bad, fmt.Sprintf("%s: %s=%q, want %q", u.Name, key, got, value))
		}
	}
	user := UserName(u.Role)
	want("User", user)
	want("Group", user)
	if user == "root" {
		bad = append(bad, u.Name+": runs as root")
	}
	want("NoNewPrivileges", "yes")
	want("ProtectSystem", "strict")
	want("RestrictSUIDSGID", "yes")
	want("RestrictNamespaces", "yes")
	want("SystemCallArchitectures", "native")
	want("CapabilityBoundingSet", "")
	want("AmbientCapabilities", "")
	if f := u.Values("Service", "SystemCallFilter"); !slices.Contains(f, "@system-service") || !slices.Contains(f, "~@privileged @resources") {
		bad = append(bad, fmt.Sprintf("%s: SystemCallFilter=%q, want @system-service and ~@privileged @resources", u.Name, f))
	}
	for _, s := range u.Sections {
		for _, k := range s.Keys {
			switch k.Name {
			case "Environment", "EnvironmentFile", "PassEnvironment", "SetCredential", "LoadCredential", "ImportCredential":
				bad = append(bad, fmt.Sprintf("%s: sets %s: a secret reaches a role only through LoadCredentialEncrypted", u.Name, k.Name))
			case "DynamicUser", "SupplementaryGroups", "PermissionsStartOnly":
				bad = append(bad, fmt.Sprintf("%s: sets %s: a role runs as its own fixed user with no other group", u.Name, k.Name))
			}
			for _, v := range k.Values {
				if _, err := Placeholders(v); err != nil {
					bad = append(bad, fmt.Sprintf("%s: %s: %v", u.Name, k.Name, err))
				}
				if strings.ContainsAny(v, "\n\r") {
					bad = append(bad, fmt.Sprintf("%s: %s holds a newline", u.Name, k.Name))
				}
			}
		}
	}
	load := u.Values("Service", "LoadCredentialEncrypted")
	for _, c := range Credentials {
		has := slices.Contains(load, c.Load())
		switch {
		case has && c.Role != u.Role:
			bad = append(bad, fmt.Sprintf("%s: LoadCredentialEncrypted=%q: credential %s is %s's alone", u.Name, load, c.Name, c.Role))
		case !has && c.Role == u.Role && !c.Optional:
			bad = append(bad, fmt.Sprintf("%s: LoadCredentialEncrypted=%q lacks credential %s, which %s needs", u.Name, load, c.Name, c.Role))
		}
	}
	for _, l := range load {
		name, _, _ := strings.Cut(l, ":")
		if c, ok := CredentialOf(name); !ok || l != c.Load() {
			bad = append(bad, fmt.Sprintf("%s: LoadCredentialEncrypted=%q is no credential of the table (name:@credential:name@)", u.Name, l))
		}
	}
	bad = append(bad, auditNetwork(u)...)
	bad = append(bad, auditPaths(u)...)
	bad = append(bad, auditRuntime(u)...)
	return bad
}

func auditNetwork(u *Unit) []string {
	var bad []string
	fam := strings.Join(u.Values("Service", "RestrictAddressFamilies"), " ")
	if !slices.Equal(u.Values("Service", "IPAddressDeny"), []string{"any"}) {
		bad = append(bad, fmt.Sprintf("%s: IPAddressDeny=%q, want any", u.Name, u.Values("Service", "IPAddressDeny")))
	}
	switch u.Role {
	case layout.Loopd, layout.Brokerd:
		if !slices.Equal(u.Values("Service", "PrivateNetwork"), []string{"yes"}) || fam != "AF_UNIX" || u.Values("Service", "IPAddressAllow") != nil {
			bad = append(bad, fmt.Sprintf("%s: has a network (PrivateNetwork=%q, RestrictAddressFamilies=%q, IPAddressAllow=%q); %s has none", u.Name,
				u.Values("Service", "PrivateNetwork"), fam, u.Values("Service", "IPAddressAllow"), u.Role))
		}
	default:
		if !slices.Equal(u.Values("Service", "IPAddressAllow"), []string{Net(u.Role)}) {
			bad = append(bad, fmt.Sprintf("%s: IPAddressAllow=%q, want only %s", u.Name, u.Values("Service", "IPAddressAllow"), Net(u.Role)))
		}
		if !slices.Equal(u.Values("Service", "SocketBindDeny"), []string{"any"}) {
			bad = append(bad, fmt.Sprintf("%s: SocketBindDeny=%q, want any: outbound only", u.Name, u.Values("Service", "SocketBindDeny")))
		}
		if fam != "AF_UNIX AF_INET AF_INET6" {
			bad = append(bad, fmt.Sprintf("%s: RestrictAddressFamilies=%q, want AF_UNIX AF_INET AF_INET6", u.Name, fam))
		}
	}
	return bad
}

// auditPaths checks the unit's view of the state directory: read-only as
// a whole, writable exactly where its role writes, every entry it has no
// business with inaccessible.
func auditPaths(u *Unit) []string {
	var bad []string
	if !slices.Contains(u.Values("Service", "BindReadOnlyPaths"), State) {
		bad = append(bad, u.Name+": the state directory is not bound read-only")
	}
	if rw, want := u.Values("Service", "BindPaths"), paths(Writable(u.Role), ""); !slices.Equal(rw, want) {
		bad = append(bad, fmt.Sprintf("%s: BindPaths=%q, want exactly %q (what %s writes)", u.Name, rw, want, u.Role))
	}
	if rw := u.Values("Service", "ReadWritePaths"); rw != nil {
		bad = append(bad, fmt.Sprintf("%s: ReadWritePaths=%q: a role writes only its own entries, each bound", u.Name, rw))
	}
	want := paths(Hidden(u.Role), "-")
	if onHost(u) {
		want = append(want, HostHidden...)
	}
	if hid := u.Values("Service", "InaccessiblePaths"); !slices.Equal(hid, want) {
		bad = append(bad, fmt.Sprintf("%s: InaccessiblePaths=%q, want %q", u.Name, hid, want))
	}
	return bad
}

// onHost is whether u runs on the host's root filesystem (brokerd's):
// it sees the host's /run unless its unit hides it.
func onHost(u *Unit) bool { return u.Values("Service", "RootDirectory") == nil }

// auditRuntime checks that no unit reaches a user manager: over its
// runtime directory's bus or private socket a role could start
// transient services (systemd-run --user) without its unit's sandbox.
// A unit on the host's root covers its user's runtime directory with an
// empty read-only tmpfs, and no unit binds anything of /run/user but
// brokerd its Podman socket's directory.
func auditRuntime(u *Unit) []string {
	var bad []string
	rt := RuntimeDir(u.Role)
	if onHost(u) && !slices.Contains(u.Values("Service", "TemporaryFileSystem"), rt+":ro") {
		bad = append(bad, fmt.Sprintf("%s: TemporaryFileSystem=%q lacks %s:ro: %s reaches its user manager (%s/bus, %s/systemd/private) and can start services outside its sandbox",
			u.Name, u.Values("Service", "TemporaryFileSystem"), rt, u.Role, rt, rt))
	}
	// A runtime directory mounted anew on the host propagates into the
	// unit's namespace over its tmpfs: the unit must stop with its user
	// manager and start again with it.
	if m := UserManager(u.Role); onHost(u) && (!slices.Contains(u.Values("Unit", "BindsTo"), m) || !slices.Contains(u.Values("Install", "WantedBy"), m)) {
		bad = append(bad, fmt.Sprintf("%s: BindsTo=%q, WantedBy=%q: without both naming %s, a runtime directory made anew while %s runs shows it the user manager's bus",
			u.Name, u.Values("Unit", "BindsTo"), u.Values("Install", "WantedBy"), m, u.Role))
	}
	for _, key := range []string{"BindPaths", "BindReadOnlyPaths", "ReadWritePaths", "ReadOnlyPaths", "ExecPaths"} {
		for _, v := range u.Values("Service", key) {
			src := bindSource(v)
			if src != "/run" && src != "/run/user" && !strings.HasPrefix(src, "/run/user/") {
				continue
			}
			if u.Role == layout.Brokerd && key == "BindReadOnlyPaths" && src == PodmanDir() {
				continue
			}
			bad = append(bad, fmt.Sprintf("%s: %s=%s exposes a user's runtime directory (its user manager's bus and private socket); only brokerd's %s, read-only, may be bound",
				u.Name, key, v, PodmanDir()))
		}
	}
	return bad
}

// bindSource is the host path of a bind or path value
// ("-src[:dst[:options]]"), cleaned.
func bindSource(v string) string {
	v = strings.TrimLeft(v, "-+")
	src, _, _ := strings.Cut(v, ":")
	return filepath.Clean(src)
}
