package units

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/layout"
)

var update = flag.Bool("update", false, "rewrite modules/deployment.json and deploy/units/*.service from the tables")

// repo is the repository's root, two levels above this package.
func repo(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// generated is every file this package generates, by its path in the
// repository.
func generated() map[string][]byte {
	out := map[string][]byte{"modules/deployment.json": JSON()}
	for _, u := range Table() {
		out["deploy/units/"+u.Name] = []byte(u.Text())
	}
	return out
}

// TestDeploymentJSON keeps modules/deployment.json (which the NixOS module
// reads) and the unit templates in deploy/units equal to the tables:
// `go test ./pkg/host/units -run TestDeploymentJSON -update` rewrites them.
func TestDeploymentJSON(t *testing.T) {
	root := repo(t)
	for path, want := range generated() {
		p := filepath.Join(root, filepath.FromSlash(path))
		if *update {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("%s: %v (go test ./pkg/host/units -run TestDeploymentJSON -update writes it)", path, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the tables; go test ./pkg/host/units -run TestDeploymentJSON -update rewrites it", path)
		}
	}
	ents, err := os.ReadDir(filepath.Join(root, "deploy", "units"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if _, ok := generated()["deploy/units/"+e.Name()]; !ok {
			t.Errorf("deploy/units/%s is not a unit of the table", e.Name())
		}
	}
}

// TestDeploymentSchema decodes the file strictly into the contract's
// schema: every key present, every list non-null, every unit's sections
// the unit's own.
func TestDeploymentSchema(t *testing.T) {
	b := JSON()
	// encoding/json, not pkg/socket/strict: the contract's exposureMax is a
	// number with a fraction, which the wire's decoder refuses.
	var d Deployment
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("decode deployment.json: %v", err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"version", "stateDir", "users", "tmpfiles", "credentials", "images", "units", "files", "configs"} {
		if v, ok := raw[k]; !ok || v == nil {
			t.Errorf("deployment.json: %q is missing or null", k)
		}
	}
	if d.Version != 1 || d.StateDir != StateDir || len(d.Users) != len(layout.Daemons) || len(d.Units) != len(layout.Daemons) {
		t.Errorf("deployment: version %d, stateDir %q, %d users, %d units", d.Version, d.StateDir, len(d.Users), len(d.Units))
	}
	for i, u := range Table() {
		j := d.Units[i]
		if j.Name != u.Name || j.Role != u.Role || int(j.ExposureMax*10+0.5) != u.ExposureMax {
			t.Errorf("unit %d: %s %s %v, want %s %s %d", i, j.Name, j.Role, j.ExposureMax, u.Name, u.Role, u.ExposureMax)
		}
		for _, s := range u.Sections {
			for _, k := range s.Keys {
				want := k.Values
				if got := j.Sections[s.Name][k.Name]; !slices.Equal(got, want) {
					t.Errorf("%s [%s] %s = %q, want %q", u.Name, s.Name, k.Name, got, want)
				}
			}
		}
	}
}

// TestDeploymentFilesAndConfigs: the files and the role configs the
// NixOS module writes are the layout's (path, mode, owners), their text
// is layout's (users.toml, the first configs) and carries only the
// contract's placeholders; each image's TLS is its role's.
func TestDeploymentFilesAndConfigs(t *testing.T) {
	d := Build()
	if len(d.Files) != 1 || d.Files[0].Path != State+"/config/users.toml" || d.Files[0].Mode != "0644" ||
		d.Files[0].Text != layout.DefaultUsers(layout.ID{}).Text() {
		t.Errorf("files: %+v", d.Files)
	}
	if len(d.Configs) != len(layout.Daemons) {
		t.Fatalf("%d configs, want one per role", len(d.Configs))
	}
	for i, r := range layout.Daemons {
		c := d.Configs[i]
		if c.Path != ConfigDir+"/"+r+".toml" || c.Mode != "0640" || c.Owner != "root" || c.Group != UserName(r) {
			t.Errorf("config of %s: %+v", r, c)
		}
		if ps, err := Placeholders(c.Text); err != nil {
			t.Errorf("config of %s: %v", r, err)
		} else if r == layout.Inferproxy && !slices.Contains(ps, Llama) || r == layout.Loopd && !slices.Contains(ps, Model) {
			t.Errorf("config of %s carries %v", r, ps)
		}
		if (c.Text == "") != (r == layout.Gatewayd) {
			t.Errorf("config of %s: first text %q (only gatewayd's is the owner's alone)", r, c.Text)
		}
	}
	for _, img := range d.Images {
		if img.TLS != (img.Role == Tool || TLS(img.Role)) {
			t.Errorf("image %s: tls %v", img.Role, img.TLS)
		}
	}
}

// TestUsersAreTheLayouts: each user's ids are users.toml's defaults and
// only brokerd (the one role with a Podman) has subordinate ids and linger.
func TestUsersAreTheLayouts(t *testing.T) {
	ids := layout.DefaultUsers(layout.ID{})
	for _, u := range Users() {
		if id := ids.Of(u.Role); u.UID != id.UID || u.GID != id.GID || u.Name != "boxmaker-"+u.Role {
			t.Errorf("user %+v, want %s %d:%d", u, "boxmaker-"+u.Role, id.UID, id.GID)
		}
		if podman := u.Role == layout.Brokerd; u.Linger != podman || (u.SubUIDCount > 0) != podman {
			t.Errorf("user %s: linger %v, %d subordinate ids; only brokerd runs Podman", u.Name, u.Linger, u.SubUIDCount)
		}
		if podman := u.Role == layout.Brokerd; u.CreateHome != podman || (u.Home == "/nonexistent") == podman {
			t.Errorf("user %s: home %q (create %v); only brokerd has one", u.Name, u.Home, u.CreateHome)
		}
		if u.SubUIDCount > 0 && u.SubUIDStart <= 65535 {
			t.Errorf("user %s: subordinate ids from %d overlap the role ids", u.Name, u.SubUIDStart)
		}
	}
}

// TestTmpfilesAreTheTable: one line per directory bxctl up makes, with the
// table's mode (setgid included), owner and group.
func TestTmpfilesAreTheTable(t *testing.T) {
	lines := Tmpfiles("/s")
	want := map[string]string{
		"d /s 0711 root root -":                                            "the state directory",
		"d /s/sessions 2750 boxmaker-loopd boxmaker-memoryd -":             "sessions",
		"d /s/run/loop 2750 boxmaker-loopd boxmaker-gatewayd -":            "loop.sock's directory",
		"d /s/grants 0750 root boxmaker-brokerd -":                         "grants",
		"d /s/secrets/gatewayd 0700 boxmaker-gatewayd boxmaker-gatewayd -": "gatewayd's secrets",
	}
	for l, what := range want {
		if !slices.Contains(lines, l) {
			t.Errorf("tmpfiles lacks %s: %q", what, l)
		}
	}
	n := 0
	for _, e := range layout.Table {
		if e.Up && e.Kind != layout.File {
			n++
		}
	}
	if len(lines) != n {
		t.Errorf("tmpfiles has %d lines, the table %d directories", len(lines), n)
	}
}

// TestTableAudits: every unit of the table keeps every invariant, with
// and without the optional credentials.
func TestTableAudits(t *testing.T) {
	for _, u := range append(Table(), Table(HonchoKey)...) {
		for _, p := range Audit(&u) {
			t.Error(p)
		}
	}
}

// TestOptionalCredential: memoryd's unit loads Honcho's key only when it
// is given, exactly as deployment.json tells an installer to add it, and
// no other unit changes with it.
func TestOptionalCredential(t *testing.T) {
	without, with1 := Of(layout.Memoryd), Of(layout.Memoryd, HonchoKey)
	if got := without.Values("Service", "LoadCredentialEncrypted"); got != nil {
		t.Errorf("memoryd without the key: LoadCredentialEncrypted=%q, want none (it runs with Honcho off)", got)
	}
	want := []string{HonchoKey + ":" + CredentialPath(HonchoKey)}
	if got := with1.Values("Service", "LoadCredentialEncrypted"); !slices.Equal(got, want) {
		t.Errorf("memoryd with the key: LoadCredentialEncrypted=%q, want %q", got, want)
	}
	with := Table(HonchoKey)
	for i, u := range Table() {
		if u.Role != layout.Memoryd && u.Text() != with[i].Text() {
			t.Errorf("%s changes with Honcho's key:\n%s\n%s", u.Name, u.Text(), with[i].Text())
		}
	}
	var d Deployment
	if err := json.Unmarshal(JSON(), &d); err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Credentials {
		cred, ok := CredentialOf(c.Name)
		if !ok || c.Optional != cred.Optional || c.Unit != UnitName(c.Role) || c.Load != cred.Load() {
			t.Errorf("deployment.json credential %+v, want %+v in %s", c, cred, UnitName(cred.Role))
		}
		// An installer's rule: a unit of the file holds a credential that
		// is not optional, and never an optional one.
		for _, u := range d.Units {
			has := slices.Contains(u.Sections["Service"]["LoadCredentialEncrypted"], c.Load)
			if has != (u.Name == c.Unit && !c.Optional) {
				t.Errorf("deployment.json: %s loads %s: %v (optional %v)", u.Name, c.Name, has, c.Optional)
			}
		}
	}
	for _, n := range []string{MattermostToken, "honcho"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Table(%q) did not panic: it is not an optional credential", n)
				}
			}()
			Table(n)
		}()
	}
}

// set replaces (or adds, or with no values removes) key in u's Service.
func set(u *Unit, key string, values ...string) { setIn(u, "Service", key, values...) }

// setIn is set in section.
func setIn(u *Unit, section, key string, values ...string) {
	for i, s := range u.Sections {
		if s.Name != section {
			continue
		}
		for j, k := range s.Keys {
			if k.Name == key {
				if values == nil {
					u.Sections[i].Keys = slices.Delete(s.Keys, j, j+1)
				} else {
					u.Sections[i].Keys[j].Values = values
				}
				return
			}
		}
		if values != nil {
			u.Sections[i].Keys = append(u.Sections[i].Keys, Key{key, values})
		}
	}
}

// TestAuditCatchesEachBreach plants one breach of each invariant and
// wants Audit to name it: the audit is what bxctl install runs, so each
// line here is a unit it would refuse to write.
func TestAuditCatchesEachBreach(t *testing.T) {
	cases := []struct {
		name, role, want string
		plant            func(*Unit)
	}{
		{"no NoNewPrivileges", layout.Gatewayd, "NoNewPrivileges", func(u *Unit) { set(u, "NoNewPrivileges") }},
		{"NoNewPrivileges off", layout.Inferproxy, "NoNewPrivileges", func(u *Unit) { set(u, "NoNewPrivileges", "no") }},
		{"root", layout.Memoryd, "User", func(u *Unit) { set(u, "User", "root") }},
		{"a capability", layout.Brokerd, "CapabilityBoundingSet", func(u *Unit) { set(u, "CapabilityBoundingSet", "CAP_NET_ADMIN") }},
		{"ambient", layout.Loopd, "AmbientCapabilities", func(u *Unit) { set(u, "AmbientCapabilities", "CAP_SYS_ADMIN") }},
		{"writable system", layout.Loopd, "ProtectSystem", func(u *Unit) { set(u, "ProtectSystem", "full") }},
		{"no syscall filter", layout.Gatewayd, "SystemCallFilter", func(u *Unit) { set(u, "SystemCallFilter") }},
		{"secret in the environment", layout.Gatewayd, "Environment", func(u *Unit) { set(u, "Environment", "MM_TOKEN=canary") }},
		{"environment file", layout.Memoryd, "EnvironmentFile", func(u *Unit) { set(u, "EnvironmentFile", "/etc/boxmaker/env") }},
		{"clear credential", layout.Gatewayd, "LoadCredential", func(u *Unit) { set(u, "LoadCredential", "mattermost-token:/etc/token") }},
		{"credential of another role", layout.Loopd, "credential mattermost-token", func(u *Unit) {
			set(u, "LoadCredentialEncrypted", "mattermost-token:"+CredentialPath("mattermost-token"))
		}},
		{"honcho key in gatewayd", layout.Gatewayd, "credential honcho-key is memoryd's alone", func(u *Unit) {
			set(u, "LoadCredentialEncrypted", append(u.Values("Service", "LoadCredentialEncrypted"), HonchoKey+":"+CredentialPath(HonchoKey))...)
		}},
		{"no token", layout.Gatewayd, "lacks credential mattermost-token", func(u *Unit) { set(u, "LoadCredentialEncrypted") }},
		{"honcho key from a clear file", layout.Memoryd, "no credential of the table", func(u *Unit) {
			set(u, "LoadCredentialEncrypted", HonchoKey+":/etc/boxmaker/honcho.key")
		}},
		{"unknown credential", layout.Memoryd, "no credential of the table", func(u *Unit) {
			set(u, "LoadCredentialEncrypted", "honcho-token:"+CredentialPath("honcho-token"))
		}},
		{"loopd with a network", layout.Loopd, "has a network", func(u *Unit) { set(u, "PrivateNetwork") }},
		{"loopd with inet", layout.Loopd, "has a network", func(u *Unit) { set(u, "RestrictAddressFamilies", "AF_UNIX AF_INET") }},
		{"brokerd with a network", layout.Brokerd, "has a network", func(u *Unit) { set(u, "PrivateNetwork", "no") }},
		{"inferproxy anywhere", layout.Inferproxy, "IPAddressDeny", func(u *Unit) { set(u, "IPAddressDeny") }},
		{"inferproxy to more", layout.Inferproxy, "IPAddressAllow", func(u *Unit) { set(u, "IPAddressAllow", Net(layout.Inferproxy), "0.0.0.0/0") }},
		{"gatewayd listening", layout.Gatewayd, "SocketBindDeny", func(u *Unit) { set(u, "SocketBindDeny") }},
		{"writes more", layout.Loopd, "BindPaths", func(u *Unit) { set(u, "BindPaths", State+"/sessions", State+"/run/loop", State+"/memory") }},
		{"writes elsewhere", layout.Memoryd, "ReadWritePaths", func(u *Unit) { set(u, "ReadWritePaths", "/etc") }},
		{"sees another pair", layout.Inferproxy, "InaccessiblePaths", func(u *Unit) {
			set(u, "InaccessiblePaths", slices.DeleteFunc(u.Values("Service", "InaccessiblePaths"), func(s string) bool { return strings.HasSuffix(s, "/run/loop") })...)
		}},
		{"state writable", layout.Memoryd, "bound read-only", func(u *Unit) { set(u, "BindReadOnlyPaths", "-/etc/hosts") }},
		{"unknown placeholder", layout.Loopd, "not one the contract defines", func(u *Unit) { set(u, "ExecStart", "@sh@ -c x") }},
		{"a second group", layout.Loopd, "SupplementaryGroups", func(u *Unit) { set(u, "SupplementaryGroups", "boxmaker-memoryd") }},
		{"brokerd sees its user manager", layout.Brokerd, "reaches its user manager", func(u *Unit) { set(u, "TemporaryFileSystem") }},
		{"brokerd's runtime dir bound back", layout.Brokerd, "exposes a user's runtime directory", func(u *Unit) {
			set(u, "BindReadOnlyPaths", append(u.Values("Service", "BindReadOnlyPaths"), RuntimeDir(layout.Brokerd))...)
		}},
		{"brokerd binds its bus", layout.Brokerd, "exposes a user's runtime directory", func(u *Unit) {
			set(u, "BindPaths", append(u.Values("Service", "BindPaths"), "-"+RuntimeDir(layout.Brokerd)+"/bus")...)
		}},
		{"brokerd reaches the system bus", layout.Brokerd, "InaccessiblePaths", func(u *Unit) {
			set(u, "InaccessiblePaths", slices.DeleteFunc(u.Values("Service", "InaccessiblePaths"), func(s string) bool { return s == "-/run/dbus" })...)
		}},
		{"brokerd outlives its user manager", layout.Brokerd, "a runtime directory made anew", func(u *Unit) { setIn(u, "Unit", "BindsTo") }},
		{"brokerd not restarted with its user manager", layout.Brokerd, "a runtime directory made anew", func(u *Unit) {
			setIn(u, "Install", "WantedBy", "multi-user.target")
		}},
		{"loopd binds a runtime dir", layout.Loopd, "exposes a user's runtime directory", func(u *Unit) {
			set(u, "BindReadOnlyPaths", append(u.Values("Service", "BindReadOnlyPaths"), "/run/user/61002:/run/user/61002")...)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := Of(c.role)
			c.plant(&u)
			got := strings.Join(Audit(&u), "\n")
			if !strings.Contains(got, c.want) {
				t.Errorf("Audit after planting %q = %q, want a line about %s", c.name, got, c.want)
			}
		})
	}
}

// TestBrokerdSeesOnlyItsPodman: of its user's runtime directory brokerd's
// unit sees only the Podman socket's directory, read-only, over an empty
// read-only tmpfs, so it cannot reach its user manager's bus or private
// socket (systemd-run --user would start a service outside its sandbox);
// the system bus is hidden too. The Podman socket is still where its
// config says (deployment.json's brokerd.toml).
func TestBrokerdSeesOnlyItsPodman(t *testing.T) {
	u := Of(layout.Brokerd)
	rt := RuntimeDir(layout.Brokerd)
	if rt != "/run/user/61004" || PodmanDir() != rt+"/podman" {
		t.Fatalf("brokerd's runtime directory %s, Podman's %s", rt, PodmanDir())
	}
	if got := u.Values("Service", "TemporaryFileSystem"); !slices.Equal(got, []string{rt + ":ro"}) {
		t.Errorf("TemporaryFileSystem=%q, want %s:ro", got, rt)
	}
	var under []string
	for _, key := range []string{"BindPaths", "BindReadOnlyPaths"} {
		for _, v := range u.Values("Service", key) {
			if strings.HasPrefix(bindSource(v), "/run/") {
				under = append(under, key+"="+v)
			}
		}
	}
	if !slices.Equal(under, []string{"BindReadOnlyPaths=-" + rt + "/podman"}) {
		t.Errorf("brokerd's binds under /run: %q, want only its Podman directory, read-only", under)
	}
	if !slices.Contains(u.Values("Service", "InaccessiblePaths"), "-/run/dbus") {
		t.Errorf("InaccessiblePaths=%q: the system bus is reachable", u.Values("Service", "InaccessiblePaths"))
	}
	if !strings.HasPrefix(PodmanSocket(), PodmanDir()+"/") || !strings.Contains(string(JSON()), `podman_socket = \"`+PodmanSocket()+`\"`) {
		t.Errorf("brokerd.toml's podman_socket is not %s inside %s", PodmanSocket(), PodmanDir())
	}
	// Stopped with its user manager, started again with it: a runtime
	// directory made anew would otherwise show through the tmpfs.
	if m := UserManager(layout.Brokerd); !slices.Equal(u.Values("Unit", "BindsTo"), []string{m}) || !slices.Contains(u.Values("Unit", "After"), m) ||
		!slices.Equal(u.Values("Install", "WantedBy"), []string{"multi-user.target", m}) || slices.Contains(u.Values("Unit", "Wants"), m) {
		t.Errorf("brokerd: After=%q Wants=%q BindsTo=%q WantedBy=%q, want bound to and wanted by %s", u.Values("Unit", "After"), u.Values("Unit", "Wants"),
			u.Values("Unit", "BindsTo"), u.Values("Install", "WantedBy"), m)
	}
	for _, other := range Table() {
		if other.Role != layout.Brokerd && other.Values("Service", "TemporaryFileSystem") != nil {
			t.Errorf("%s: TemporaryFileSystem=%q", other.Name, other.Values("Service", "TemporaryFileSystem"))
		}
	}
}

// TestLoopdHasNoNetwork is the issue's own line, on the table itself.
func TestLoopdHasNoNetwork(t *testing.T) {
	u := Of(layout.Loopd)
	if !slices.Equal(u.Values("Service", "PrivateNetwork"), []string{"yes"}) || !slices.Equal(u.Values("Service", "RestrictAddressFamilies"), []string{"AF_UNIX"}) {
		t.Errorf("loopd: PrivateNetwork=%q RestrictAddressFamilies=%q", u.Values("Service", "PrivateNetwork"), u.Values("Service", "RestrictAddressFamilies"))
	}
}

// TestNoUnitCarriesASecret: no value of any unit names a credential except
// LoadCredentialEncrypted's, and no unit has an environment at all.
func TestNoUnitCarriesASecret(t *testing.T) {
	for _, u := range append(Table(), Table(HonchoKey)...) {
		for _, s := range u.Sections {
			for _, k := range s.Keys {
				if strings.HasPrefix(k.Name, "Environment") || k.Name == "PassEnvironment" {
					t.Errorf("%s sets %s", u.Name, k.Name)
				}
				for _, v := range k.Values {
					for _, c := range Credentials {
						if strings.Contains(v, c.Name) && k.Name != "LoadCredentialEncrypted" {
							t.Errorf("%s: %s=%q names credential %s", u.Name, k.Name, v, c.Name)
						}
					}
				}
			}
		}
	}
}

// TestEverySocketIsReachableByItsPair: each socket directory is writable
// in its listener's unit and visible (not inaccessible) in each client's,
// and inaccessible in every other role's.
func TestEverySocketIsReachableByItsPair(t *testing.T) {
	for _, e := range layout.Table {
		if e.Kind != layout.SocketDir || e.Owner == layout.Root {
			continue
		}
		for _, r := range layout.Daemons {
			u := Of(r)
			hidden := slices.Contains(u.Values("Service", "InaccessiblePaths"), "-"+State+"/"+e.Path)
			writable := slices.Contains(u.Values("Service", "BindPaths"), State+"/"+e.Path)
			party := r == e.Owner || slices.Contains(e.Accept, r)
			if hidden == party || writable != (r == e.Owner) {
				t.Errorf("%s in %s: hidden %v, writable %v (listener %s, clients %v)", e.Path, u.Name, hidden, writable, e.Owner, e.Accept)
			}
		}
	}
}

func TestSubstitute(t *testing.T) {
	v := map[string]string{"@state@": "/var/lib/boxmaker", "@root:loopd@": "/usr/lib/boxmaker/images/abc"}
	got, err := Substitute("RootDirectory=@root:loopd@\nBindReadOnlyPaths=@state@\n", v)
	if err != nil || got != "RootDirectory=/usr/lib/boxmaker/images/abc\nBindReadOnlyPaths=/var/lib/boxmaker\n" {
		t.Errorf("Substitute = %q, %v", got, err)
	}
	if _, err := Substitute("ExecStart=@bin:brokerd@", v); err == nil || !strings.Contains(err.Error(), "@bin:brokerd@") {
		t.Errorf("Substitute with a placeholder left = %v, want an error naming it", err)
	}
	if _, err := Substitute("X=@state@", map[string]string{"@state@": "/x\nExecStartPre=/bin/sh"}); err == nil {
		t.Error("Substitute took a value with a newline")
	}
	for _, u := range Table() {
		if _, err := Placeholders(u.Text()); err != nil {
			t.Errorf("%s: %v", u.Name, err)
		}
	}
}
