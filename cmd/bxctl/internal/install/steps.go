package install

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/first"
	"wntrmute.dev/boxmaker/pkg/host/units"
)

// makeUsers creates each role's user and group with the table's ids (a
// system account, no login shell, no home but brokerd's), brokerd's
// subordinate ids and linger, and starts brokerd's user manager with its
// Podman socket. What is there already was checked by prepare.
func makeUsers(r runner, o Options, p *plan) error {
	for _, u := range units.Users() {
		if !p.have[u.Name] {
			if _, err := r.run(nil, "groupadd", "--system", "--gid", fmt.Sprint(u.GID), u.Name); err != nil {
				return err
			}
			if _, err := r.run(nil, "useradd", "--system", "--uid", fmt.Sprint(u.UID), "--gid", fmt.Sprint(u.GID),
				"--no-create-home", "--home-dir", u.Home, "--shell", "/usr/sbin/nologin", "--comment", "Boxmaker "+u.Role, u.Name); err != nil {
				return err
			}
		}
		if u.CreateHome {
			if err := home(u); err != nil {
				return err
			}
		}
		if p.addSub[u.Name] {
			span := fmt.Sprintf("%d-%d", u.SubUIDStart, u.SubUIDStart+u.SubUIDCount-1)
			if _, err := r.run(nil, "usermod", "--add-subuids", span, "--add-subgids", span, u.Name); err != nil {
				return err
			}
		}
		if u.Linger {
			if _, err := r.run(nil, "loginctl", "enable-linger", u.Name); err != nil {
				return err
			}
			if _, err := r.run(nil, "systemctl", "start", fmt.Sprintf("user@%d.service", u.UID)); err != nil {
				return err
			}
			if _, err := r.run(nil, "systemctl", "--user", "--machine="+u.Name+"@", "enable", "--now", "podman.socket"); err != nil {
				return Refusal{fmt.Sprintf("%v (brokerd's Podman is its user manager's podman.socket, which Podman's package installs)", err), "see docs/runbook.md#install-podman"}
			}
		}
	}
	return nil
}

// home makes u's home 0700 and its own when it is missing (one there
// was checked by checkHome).
func home(u units.User) error {
	if err := os.Mkdir(u.Home, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil
		}
		return fmt.Errorf("install: home of %s: %w", u.Name, err)
	}
	return os.Chown(u.Home, int(u.UID), int(u.GID))
}

// makeState writes users.toml (the table's ids) and each first config,
// the owner's gatewayd.toml and the configs prepare rewrote, and makes
// the tree by package layout.
func makeState(o Options, p *plan) error {
	fresh, err := layout.Fresh(o.State)
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	if err := os.MkdirAll(o.State, 0o700); err != nil {
		return fmt.Errorf("install: state: %w", err)
	}
	if err := os.MkdirAll(layout.Config.In(o.State), 0o700); err != nil {
		return fmt.Errorf("install: state: %w", err)
	}
	if err := writeNew(layout.UsersFile.In(o.State), []byte(layout.DefaultUsers(layout.ID{}).Text()), 0o644); err != nil {
		return err
	}
	for path, b := range p.writes {
		if err := writeFile(path, b, 0o600); err != nil {
			return err
		}
	}
	params := first.Params{State: o.State, Llama: o.Llama, Model: o.Model, ToolImage: p.im[units.Tool].ID, PodmanSocket: units.PodmanSocket()}
	for _, c := range first.Configs {
		if err := writeNew(c.Path(o.State), []byte(c.Text(params)), 0o600); err != nil {
			return err
		}
	}
	if p.gateway != nil {
		if err := writeNew(layout.ConfigPath(o.State, layout.Gatewayd), p.gateway, 0o600); err != nil {
			return err
		}
	}
	users, err := layout.LoadUsers(o.State)
	if err != nil {
		return err
	}
	if err := layout.Make(o.State, users); err != nil {
		return err
	}
	if fresh {
		if err := layout.WriteFormat(o.State, layout.Format); err != nil {
			return err
		}
	}
	return layout.Enterable(o.State, users)
}

// writeNew writes a file that does not exist yet; an existing one is the
// owner's and is left alone (prepare decided what of it to rewrite).
func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	_, werr := f.Write(b)
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	return nil
}

// unpack makes each role image's root filesystem, under its ID, unless it
// is there already (a directory named by the ID holds that image: it is
// made under another name and renamed once whole).
func unpack(o Options, im Images, out io.Writer) error {
	if err := os.MkdirAll(o.ImageRoot, 0o755); err != nil {
		return fmt.Errorf("install: images: %w", err)
	}
	for _, r := range layout.Daemons {
		a := im[r]
		dir := rootOf(o, a.ID)
		if fi, err := os.Lstat(dir); err == nil && fi.IsDir() {
			fmt.Fprintf(out, "image %s %s: unpacked already in %s\n", r, a.ID, dir)
			continue
		}
		tmp := dir + ".partial"
		if err := os.RemoveAll(tmp); err != nil {
			return fmt.Errorf("install: images: %w", err)
		}
		if err := a.Extract(tmp); err != nil {
			return err
		}
		if err := os.Rename(tmp, dir); err != nil {
			return fmt.Errorf("install: images: %w", err)
		}
		fmt.Fprintf(out, "image %s %s: unpacked in %s\n", r, a.ID, dir)
	}
	return nil
}

// loadTool loads the tool image into brokerd's rootless Podman (the
// archive ReadImages checked, on stdin, as brokerd's user) and checks Podman holds it by its ID.
func loadTool(r runner, o Options, p *plan) error {
	b, im := p.tool, p.im
	var u units.User
	for _, x := range units.Users() {
		if x.Role == layout.Brokerd {
			u = x
		}
	}
	as := []string{"runuser", "-u", u.Name, "--", "env", "HOME=" + u.Home, fmt.Sprintf("XDG_RUNTIME_DIR=/run/user/%d", u.UID), o.Podman}
	if _, err := r.run(b, append(as, "load")...); err != nil {
		return err
	}
	id, err := r.run(nil, append(as, "image", "inspect", "--format", "{{.Id}}", im[units.Tool].ID)...)
	if err != nil {
		return err
	}
	if got := "sha256:" + strings.TrimPrefix(strings.TrimSpace(string(id)), "sha256:"); got != im[units.Tool].ID {
		return Refusal{fmt.Sprintf("brokerd's Podman holds %s after loading, not %s", got, im[units.Tool].ID), "see docs/runbook.md#install-image"}
	}
	return nil
}
