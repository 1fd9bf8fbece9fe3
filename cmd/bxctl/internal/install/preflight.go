// Package install is `bxctl install`: it deploys Boxmaker on a systemd
// host that is not NixOS (decision P22) from pkg/host/units' table, the same
// table the NixOS module reads as modules/deployment.json. It creates the
// role users with their fixed ids, brokerd's subordinate ids and linger,
// the state tree by package layout, unpacks the role images (checked by
// pkg/host/imagearchive) as the units' root filesystems, loads the tool image
// into brokerd's rootless Podman, encrypts the credentials (the bot
// token; Honcho's key when memoryd's config names it) with systemd-creds,
// and writes, enables and starts the units.
//
// Invariants: every refusal that can be decided before a change is
// decided before the first one (prepare: the host, the images, the flags,
// the accounts, the subordinate ids, the state directory, the
// credentials), all reported together, each naming its docs/runbook.md
// entry; an image is unpacked or loaded only when it, its directory and
// images.ids pass package ownership's rule and its ID is its images.ids
// line's (and images.ids is --expect's digest, when given); a path goes
// into unit text only when absolute, clean and of [pathOK]'s alphabet;
// each credential goes from its stdin to systemd-creds' stdin and is
// never written in clear, logged, put in an argument or in an
// environment; a credential is taken exactly when a unit written loads it
// (the token with gatewayd, Honcho's key when memoryd.toml names
// credential:honcho-key); a unit is written only after units.Audit passes
// on it and with every placeholder substituted; an owner's file is
// changed only in the installer-owned keys' lines, or replaced when the
// owner says so (--replace-gateway-config); a running unit whose file,
// config or credential changed is restarted.
package install

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"wntrmute.dev/boxmaker/pkg/host/imagearchive"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/units"
)

// cgroup2Magic is CGROUP2_SUPER_MAGIC (linux/magic.h).
const cgroup2Magic = 0x63677270

// Host is what preflight looks at; tests replace each part.
type Host struct {
	Euid     func() int
	Stat     func(string) (os.FileInfo, error)
	FSType   func(string) (int64, error) // statfs(2)'s f_type
	LookPath func(string) (string, error)
	Output   func(argv ...string) ([]byte, error)
	Lstat    func(string) (os.FileInfo, error)
	// Getent is getent(1)'s first line for key in db (passwd, group);
	// found is false when the name service has no such entry (exit 2).
	Getent func(db, key string) (line string, found bool, err error)
}

// RealHost is this machine.
func RealHost() Host {
	return Host{
		Euid: os.Geteuid,
		Stat: os.Stat,
		FSType: func(p string) (int64, error) {
			var st syscall.Statfs_t
			if err := syscall.Statfs(p, &st); err != nil {
				return 0, err
			}
			return int64(st.Type), nil
		},
		LookPath: exec.LookPath,
		Output:   func(argv ...string) ([]byte, error) { return exec.Command(argv[0], argv[1:]...).Output() },
		Lstat:    os.Lstat,
		Getent:   getent,
	}
}

// getent asks the name service, as every login does (bxctl is built
// without cgo, so os/user would read only /etc/passwd and /etc/group).
func getent(db, key string) (string, bool, error) {
	out, err := exec.Command("getent", db, key).Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 2 {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return line, true, nil
}

// Refusal is one reason the host cannot take the deployment.
type Refusal struct {
	What    string
	Pointer string // "see docs/runbook.md#<anchor>"
}

func (r Refusal) Error() string { return "install: " + r.What + "; " + r.Pointer }

// noSystemd is the refusal of a host whose init is not systemd.
const noSystemd = "systemd is not this host's init (/run/systemd/system is missing): the units need systemd as PID 1"

// tools are the programs install runs.
var tools = []string{"systemctl", "systemd-creds", "loginctl", "useradd", "groupadd", "usermod", "runuser", "getent"}

var versionRE = regexp.MustCompile(`(?m)^(?:systemd|podman version) (\d+)`)

// Preflight checks that h can take the deployment, changing nothing. It
// returns every refusal, so the owner fixes them in one pass.
func Preflight(h Host, podman string) []Refusal {
	var out []Refusal
	if h.Euid() != 0 {
		return []Refusal{{"not root: it creates users, writes units in /etc/systemd/system and starts them (run it with sudo)", "see docs/runbook.md#install-not-root"}}
	}
	if fi, err := h.Stat("/run/systemd/system"); err != nil || !fi.IsDir() {
		return []Refusal{{noSystemd, "see docs/runbook.md#install-no-systemd"}}
	}
	if t, err := h.FSType("/sys/fs/cgroup"); err != nil || t != cgroup2Magic {
		out = append(out, Refusal{"/sys/fs/cgroup is not the unified cgroup v2 hierarchy: rootless Podman's limits and the units' IP rules need it", "see docs/runbook.md#install-cgroup-v1"})
	}
	for _, tool := range tools {
		if _, err := h.LookPath(tool); err != nil {
			out = append(out, Refusal{tool + " is not installed (systemd 250 or later, passwd, uidmap, util-linux)", "see docs/runbook.md#install-no-systemd"})
		}
	}
	if v, ok := major(h, "systemctl", "--version"); ok && v < 250 {
		out = append(out, Refusal{fmt.Sprintf("systemd %d is older than 250: LoadCredentialEncrypted= and systemd-creds need 250 or later", v), "see docs/runbook.md#install-no-creds"})
	}
	if _, err := h.LookPath(podman); err != nil {
		out = append(out, Refusal{"no podman at " + podman + " (--podman): brokerd's tool containers need Podman 5", "see docs/runbook.md#install-podman"})
	} else if v, ok := major(h, podman, "--version"); !ok || v < 5 {
		out = append(out, Refusal{fmt.Sprintf("%s --version is not Podman 5 or later (found %d): brokerd's runner needs 5's API", podman, v), "see docs/runbook.md#install-podman"})
	}
	return out
}

// major is the first number after "systemd " or "podman version " in
// argv's output.
func major(h Host, argv ...string) (int, bool) {
	out, err := h.Output(argv...)
	if err != nil {
		return 0, false
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(string(m[1]))
	return n, err == nil
}

// Images are the checked archives, by role (and units.Tool).
type Images map[string]*imagearchive.Archive

// Existing says, for each role user, whether it exists already with its
// ids; another account holding its name or id is a refusal. It asks the
// name service (getent: /etc/passwd and /etc/group, and LDAP or sssd
// where nsswitch.conf names them), since a uid taken in a directory
// service is as taken as a local one.
func Existing(h Host) (map[string]bool, error) {
	have := map[string]bool{}
	var errs []error
	for _, u := range units.Users() {
		uOK, uerr := match(h, "passwd", u.Name, u.UID, "user")
		gOK, gerr := match(h, "group", u.Name, u.GID, "group")
		errs = append(errs, uerr, gerr)
		if uOK != gOK && uerr == nil && gerr == nil {
			errs = append(errs, Refusal{fmt.Sprintf("%s exists as a user or a group but not both", u.Name), "see docs/runbook.md#install-user-conflict"})
		}
		have[u.Name] = uOK && gOK
	}
	return have, errors.Join(errs...)
}

// match looks name and id up in db (passwd or group): found with both,
// a refusal when either belongs to another entry.
func match(h Host, db, name string, id uint32, what string) (bool, error) {
	byName, okName, err := lookup(h, db, name)
	if err != nil {
		return false, err
	}
	byID, okID, err := lookup(h, db, strconv.FormatUint(uint64(id), 10))
	if err != nil {
		return false, err
	}
	switch {
	case okName && byName.id != id:
		return false, Refusal{fmt.Sprintf("%s %s exists with id %d, but Boxmaker's table gives it %d", what, name, byName.id, id), "see docs/runbook.md#install-user-conflict"}
	case okID && byID.name != name:
		return false, Refusal{fmt.Sprintf("%s id %d is %s's, but Boxmaker's table gives it to %s", what, id, byID.name, name), "see docs/runbook.md#install-user-conflict"}
	}
	return okName, nil
}

// entry is one passwd or group entry's name and id.
type entry struct {
	name string
	id   uint32
}

func lookup(h Host, db, key string) (entry, bool, error) {
	line, found, err := h.Getent(db, key)
	if err != nil {
		return entry{}, false, fmt.Errorf("install: getent %s %s: %w", db, key, err)
	}
	if !found {
		return entry{}, false, nil
	}
	f := strings.Split(strings.TrimSpace(line), ":")
	if len(f) < 3 {
		return entry{}, false, fmt.Errorf("install: getent %s %s: %q is not an entry", db, key, line)
	}
	n, err := strconv.ParseUint(f[2], 10, 32)
	if err != nil {
		return entry{}, false, fmt.Errorf("install: getent %s %s: %q is not an entry", db, key, line)
	}
	return entry{f[0], uint32(n)}, true, nil
}

// sameUsers is whether users.toml's text gives the table's ids (the units
// name users whose ids are fixed).
func sameUsers(text string) bool {
	return bytes.Equal([]byte(text), []byte(layout.DefaultUsers(layout.ID{}).Text()))
}
