package install

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/units"
)

// plan is what one install does, decided before its first change.
type plan struct {
	im      Images
	tool    []byte // tool.tar as checked
	given   []string
	files   map[string]string // unit name to text
	order   []string
	have    map[string]bool   // role users already there
	addSub  map[string]bool   // users whose subordinate ids are added
	gateway []byte            // the owner's gatewayd.toml, nil without
	writes  map[string][]byte // config files rewritten, by path
	restart []string          // units to restart when running
}

// prepare makes the plan, changing nothing: every refusal that can be
// decided before the install changes the host is decided here, and all
// are returned together so the owner fixes them in one pass. Only a
// host that is not root or has no systemd stops it early (nothing else
// can be judged there).
func prepare(o Options, h Host, secrets map[string][]byte) (*plan, error) {
	var errs []error
	for _, r := range Preflight(h, o.Podman) {
		if r.Pointer == "see docs/runbook.md#install-not-root" || r.What == noSystemd {
			return nil, r
		}
		errs = append(errs, r)
	}
	errs = append(errs, checkPaths(o)...)
	p := &plan{writes: map[string][]byte{}, addSub: map[string]bool{}}
	var err error
	if p.im, p.tool, err = ReadImages(o.Images, o.Owners, o.Expect); err != nil {
		errs = append(errs, err)
	}
	if p.given, err = Needed(o, secrets); err != nil {
		errs = append(errs, err)
	}
	if o.GatewayConfig != "" {
		if p.gateway, err = readGatewayConfig(o.GatewayConfig, o.Owners); err != nil {
			errs = append(errs, err)
		}
	}
	if p.im != nil {
		values, err := Values(o, p.im)
		if err == nil {
			p.files, p.order, err = UnitFiles(values, o.GatewayConfig != "", p.given...)
		}
		errs = append(errs, err)
	} else if _, err := checkNetworks(o); err != nil {
		errs = append(errs, err)
	}
	if p.have, err = Existing(h); err != nil {
		errs = append(errs, err)
	}
	for _, u := range units.Users() {
		if u.CreateHome {
			errs = append(errs, checkHome(h, u))
		}
		if u.SubUIDCount > 0 {
			add, err := checkSubIDs(o.Etc, u)
			p.addSub[u.Name] = add
			errs = append(errs, err)
		}
	}
	if b, err := os.ReadFile(layout.UsersFile.In(o.State)); err == nil && !sameUsers(string(b)) {
		errs = append(errs, Refusal{layout.UsersFile.In(o.State) + " gives other ids than the units' users (61001 to 61005)", "see docs/runbook.md#install-users-differ"})
	}
	// Installing an older build over a state a newer one wrote would
	// leave every role refusing to start: refuse before changing anything.
	if _, err := layout.CheckFormat(o.State, "bxctl install"); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, enterable(o.State))
	errs = append(errs, p.again(o, secrets)...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// again decides what a run over an earlier install changes (decision
// row "re-running bxctl install"): the owner's gatewayd.toml is replaced
// only when --replace-gateway-config says so, and refused with the
// difference otherwise; the keys only the install's inputs decide
// (brokerd's tool image and its Podman socket, inferproxy's upstream)
// are set to this install's values in the files the owner may have
// edited; and every unit whose file, config or credential changes is
// restarted.
func (p *plan) again(o Options, secrets map[string][]byte) []error {
	var errs []error
	restart := map[string]bool{}
	if p.gateway != nil {
		path := layout.ConfigPath(o.State, layout.Gatewayd)
		old, err := os.ReadFile(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			restart[layout.Gatewayd] = true
		case err != nil:
			errs = append(errs, fmt.Errorf("install: read %s: %w", path, err))
		case bytes.Equal(old, p.gateway):
		case !o.ReplaceGatewayConfig:
			errs = append(errs, Refusal{fmt.Sprintf("%s differs from the one installed at %s (lines of the installed one -, of yours +):\n%s  run again with --replace-gateway-config to install yours, or copy the installed one over yours to keep it",
				o.GatewayConfig, path, lineDiff(string(old), string(p.gateway))), "see docs/runbook.md#install-gateway-config-differs"})
		default:
			p.writes[path] = p.gateway
			restart[layout.Gatewayd] = true
		}
	}
	if p.im != nil {
		for _, k := range []struct{ role, table, key, value string }{
			{layout.Brokerd, "runner", "tool_image", p.im[units.Tool].ID},
			{layout.Brokerd, "runner", "podman_socket", units.PodmanSocket()},
			{layout.Inferproxy, "", "upstream", o.Llama},
		} {
			path := layout.ConfigPath(o.State, k.role)
			text, ok := p.writes[path]
			if !ok {
				b, err := os.ReadFile(path)
				if errors.Is(err, os.ErrNotExist) {
					continue // the first config is written with this value
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("install: read %s: %w", path, err))
					continue
				}
				text = b
			}
			out, changed, err := setKey(path, string(text), k.table, k.key, k.value)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if changed {
				p.writes[path] = []byte(out)
				restart[k.role] = true
			}
		}
	}
	for name, text := range p.files {
		if old, err := os.ReadFile(filepath.Join(o.UnitDir, name)); err != nil || string(old) != text {
			restart[roleOf(name)] = true
		}
	}
	// A credential given is encrypted again (the old one is not
	// decrypted to compare), so its unit restarts to load it.
	for _, c := range units.Credentials {
		if _, ok := secrets[c.Name]; ok {
			restart[c.Role] = true
		}
	}
	for _, name := range p.order {
		if restart[roleOf(name)] {
			p.restart = append(p.restart, name)
		}
	}
	return errs
}

// roleOf is the role of unit name (units.UnitName's inverse).
func roleOf(name string) string {
	for _, r := range layout.Daemons {
		if units.UnitName(r) == name {
			return r
		}
	}
	return ""
}

// checkHome refuses a home of u's that is there but not a 0700
// directory of u's.
func checkHome(h Host, u units.User) error {
	fi, err := h.Lstat(u.Home)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("install: home of %s: %w", u.Name, err)
	}
	if !fi.IsDir() || owner(fi) != u.UID || fi.Mode().Perm()&0o077 != 0 {
		return Refusal{fmt.Sprintf("%s exists but is not a directory of %s's with mode 0700", u.Home, u.Name), "see docs/runbook.md#install-user-conflict"}
	}
	return nil
}

// owner is the uid owning fi; an impossible one when the platform does
// not say, so that nothing passes by accident.
func owner(fi os.FileInfo) uint32 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return ^uint32(0)
}

// enterable refuses, before anything is made, a state directory the role
// users could not reach (layout.Enterable, which the install runs again
// once the tree is made): its parent must exist, since MkdirAll would
// make it 0700, and every directory above it must let them pass.
func enterable(state string) error {
	if !filepath.IsAbs(state) {
		return nil // checkPaths refuses it
	}
	if _, err := os.Stat(filepath.Dir(state)); err != nil {
		return Refusal{fmt.Sprintf("--state %s: the directory above it is not there (%v): make it, mode 0755, so the role users can pass it", state, err), "see docs/runbook.md#install-path"}
	}
	return layout.Enterable(state, layout.DefaultUsers(layout.ID{}))
}
