package units

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/first"
)

// StateDir is the state directory of a deployed host.
const StateDir = "/var/lib/boxmaker"

// SubUIDStart and SubUIDCount are brokerd's subordinate ids: its rootless
// Podman gives each tool call a user namespace from them (keep-id maps the
// call's 65534 to brokerd's uid, so the range must reach past 65534).
// They lie above every role's uid. No other role runs Podman, so no other
// role has any: a role that could run newuidmap would gain nothing, and
// none can (NoNewPrivileges=yes), but nothing is granted that is not used.
const (
	SubUIDStart = 200000
	SubUIDCount = 65536
)

// BrokerHome is brokerd's home: its rootless Podman's storage and
// configuration (0700, its own).
const BrokerHome = "/var/lib/boxmaker-brokerd"

// PodmanSocket is brokerd's user's Podman API socket (its user manager's
// podman.socket, started at boot by linger).
func PodmanSocket() string {
	return fmt.Sprintf("/run/user/%d/podman/podman.sock", layout.DefaultUsers(layout.ID{}).Of(layout.Brokerd).UID)
}

// Deployment is modules/deployment.json: the schema of
// docs/units.md (the contract with the NixOS module). Every list is non-nil.
type Deployment struct {
	Version     int              `json:"version"`
	StateDir    string           `json:"stateDir"`
	Users       []User           `json:"users"`
	Tmpfiles    []string         `json:"tmpfiles"`
	Credentials []CredentialJSON `json:"credentials"`
	Images      []ImageJSON      `json:"images"`
	Units       []UnitJSON       `json:"units"`
	// Files (beyond the contract's first schema) are the files of the
	// state tree an installer writes as they are: config/users.toml, the
	// ids every daemon checks its peers and its entries against.
	Files []FileJSON `json:"files"`
	// Configs are each role's config file (the layout's config/<role>.toml
	// entry: its path, mode, owner and group) with its first text, as
	// `bxctl up` and bxctl install write it (first.Configs, with
	// placeholders for the host's values); "" for a role whose config
	// only the owner can write (gatewayd's Mattermost details).
	Configs []FileJSON `json:"configs"`
	// Repeatable (beyond the contract's first schema) is [Repeatable]:
	// per section, the keys systemd takes more than once. The NixOS
	// module sets these as lists and every other key as a string
	// (nixpkgs' checkService refuses a one-element list for Type=).
	Repeatable map[string][]string `json:"repeatable"`
}

// FileJSON is one file an installer writes: its path (with placeholders),
// mode, owner, group and text.
type FileJSON struct {
	Path  string `json:"path"`
	Mode  string `json:"mode"`
	Owner string `json:"owner"`
	Group string `json:"group"`
	Text  string `json:"text"`
}

// User is one role's system user.
type User struct {
	Role        string `json:"role"`
	Name        string `json:"name"`
	UID         uint32 `json:"uid"`
	GID         uint32 `json:"gid"`
	SubUIDStart uint32 `json:"subUidStart"`
	SubUIDCount uint32 `json:"subUidCount"`
	Linger      bool   `json:"linger"`
	// Home and CreateHome (beyond the contract's first schema): brokerd's
	// rootless Podman keeps its storage under its home; no other role has
	// one.
	Home       string `json:"home"`
	CreateHome bool   `json:"createHome"`
}

// CredentialJSON is a [Credential] in the file.
type CredentialJSON struct {
	Role string `json:"role"`
	Name string `json:"name"`
	Doc  string `json:"doc"`
	// Optional and Load (beyond the contract's first schema): an optional
	// credential is in no unit of the file; an installer given it adds
	// Load (its LoadCredentialEncrypted= value, with the placeholder) to
	// Unit's LoadCredentialEncrypted=. A credential that is not optional
	// is in its unit already.
	Optional bool   `json:"optional"`
	Unit     string `json:"unit"`
	Load     string `json:"load"`
}

// ImageJSON is one image: a role's, or the tool image (role "tool").
type ImageJSON struct {
	Role   string `json:"role"`
	Name   string `json:"name"`
	Binary string `json:"binary"`
	// TLS (beyond the contract's first schema) is whether the image holds
	// the CA bundle: [TLS] of its role; the tool image always does (its
	// tools fetch over HTTPS). The Nix images read it, so the table says
	// it once.
	TLS bool `json:"tls"`
}

// UnitJSON is a [Unit] in the file: sections as section -> key -> values.
type UnitJSON struct {
	Name        string                         `json:"name"`
	Role        string                         `json:"role"`
	ExposureMax float64                        `json:"exposureMax"`
	Sections    map[string]map[string][]string `json:"sections"`
}

// Tool is the tool image's role name in [Deployment.Images].
const Tool = "tool"

// Users is every role's system user with the default ids (61001 to 61005).
func Users() []User {
	u := layout.DefaultUsers(layout.ID{})
	var out []User
	for _, r := range layout.Daemons {
		id := u.Of(r)
		usr := User{Role: r, Name: UserName(r), UID: id.UID, GID: id.GID, Home: "/nonexistent"}
		if r == layout.Brokerd {
			usr.SubUIDStart, usr.SubUIDCount, usr.Linger = SubUIDStart, SubUIDCount, true
			usr.Home, usr.CreateHome = BrokerHome, true
		}
		out = append(out, usr)
	}
	return out
}

// Tmpfiles is the state tree as tmpfiles.d lines: every entry `bxctl up`
// makes, its mode, user and group (the owner is root on a deployed host).
func Tmpfiles(state string) []string {
	var out []string
	for _, e := range layout.Table {
		if !e.Up || e.Kind == layout.File {
			continue
		}
		p := state
		if e.Path != "." {
			p = state + "/" + e.Path
		}
		out = append(out, fmt.Sprintf("d %s %04o %s %s -", p, unixMode(e), UserName(e.Owner), UserName(e.GroupRole())))
	}
	return out
}

// unixMode is e's mode as tmpfiles and chmod write it (setgid as 02000).
func unixMode(e *layout.Entry) uint32 {
	m := uint32(e.Mode.Perm())
	if e.Mode&(1<<22) != 0 { // fs.ModeSetgid
		m |= 0o2000
	}
	return m
}

// Build is the deployment.
func Build() Deployment {
	d := Deployment{Version: 1, StateDir: StateDir, Users: Users(), Tmpfiles: Tmpfiles(StateDir),
		Credentials: []CredentialJSON{}, Images: []ImageJSON{}, Units: []UnitJSON{}, Repeatable: Repeatable,
		Files: []FileJSON{{Path: State + "/" + layout.UsersFile.Path, Mode: fmt.Sprintf("%04o", layout.UsersFile.Mode.Perm()),
			Owner: "root", Group: "root", Text: layout.DefaultUsers(layout.ID{}).Text()}}}
	for _, r := range layout.Daemons {
		e := layout.ConfigFile(r)
		f := FileJSON{Path: ConfigDir + "/" + r + ".toml", Mode: fmt.Sprintf("%04o", e.Mode.Perm()),
			Owner: UserName(e.Owner), Group: UserName(e.GroupRole())}
		for _, c := range first.Configs {
			if c.Role == r {
				f.Text = c.Text(first.Params{State: StateDir, Llama: Llama, Model: Model, ToolImage: Image(Tool), PodmanSocket: PodmanSocket()})
			}
		}
		d.Configs = append(d.Configs, f)
	}
	for _, c := range Credentials {
		d.Credentials = append(d.Credentials, CredentialJSON{Role: c.Role, Name: c.Name, Doc: c.Doc, Optional: c.Optional, Unit: UnitName(c.Role), Load: c.Load()})
	}
	for _, r := range layout.Daemons {
		d.Images = append(d.Images, ImageJSON{Role: r, Name: "boxmaker-" + r, Binary: r, TLS: TLS(r)})
	}
	d.Images = append(d.Images, ImageJSON{Role: Tool, Name: "boxmaker-tool", Binary: "toolkit", TLS: true})
	for _, u := range Table() {
		j := UnitJSON{Name: u.Name, Role: u.Role, ExposureMax: float64(u.ExposureMax) / 10, Sections: map[string]map[string][]string{}}
		for _, s := range u.Sections {
			m := map[string][]string{}
			for _, k := range s.Keys {
				m[k.Name] = append([]string{}, k.Values...)
			}
			j.Sections[s.Name] = m
		}
		d.Units = append(d.Units, j)
	}
	return d
}

// JSON is modules/deployment.json's text.
func JSON() []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(Build()); err != nil {
		panic("units: encode the deployment: " + err.Error()) // plain data: cannot fail
	}
	return b.Bytes()
}

// placeholderRE matches every placeholder the contract defines.
var placeholderRE = regexp.MustCompile(`@(podman|state|config|llama|model|(image|root|net):[a-z]+|bin:[a-z]+|credential:[a-z][a-z0-9-]*)@`)

// anyAtRE matches anything that looks like a placeholder.
var anyAtRE = regexp.MustCompile(`@[^@\s]*@`)

// Placeholders is every placeholder in s, in order; a malformed one (an
// @...@ the contract does not define) is an error.
func Placeholders(s string) ([]string, error) {
	var out []string
	for _, m := range anyAtRE.FindAllString(s, -1) {
		if !placeholderRE.MatchString(m) || placeholderRE.FindString(m) != m {
			return nil, fmt.Errorf("placeholders: %q is not one the contract defines", m)
		}
		out = append(out, m)
	}
	return out, nil
}

// Substitute replaces every placeholder in text by its value in values,
// and fails on one it has no value for: a unit is never written with a
// placeholder left in it. A value may not itself hold a newline (it would
// start a new key) or an @ (it would read as a placeholder).
func Substitute(text string, values map[string]string) (string, error) {
	for k, v := range values {
		if strings.ContainsAny(v, "\n\r@") {
			return "", fmt.Errorf("substitute %s: its value holds a newline or an @", k)
		}
	}
	var missing string
	out := anyAtRE.ReplaceAllStringFunc(text, func(m string) string {
		v, ok := values[m]
		if !ok && missing == "" {
			missing = m
		}
		return v
	})
	if missing != "" {
		return "", fmt.Errorf("substitute: no value for %s; see docs/runbook.md#install-placeholder", missing)
	}
	return out, nil
}
