package install

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/ownership"
	"wntrmute.dev/boxmaker/pkg/host/units"
)

// Options are bxctl install's flags.
type Options struct {
	Images        string // the directory holding <role>.tar, tool.tar and images.ids
	State         string
	Podman        string
	Llama         string // llama-server's ip:port
	Model         string
	MattermostNet string // IPAddressAllow= of gatewayd
	HonchoNet     string // IPAddressAllow= of memoryd
	GatewayConfig string // the owner's gatewayd.toml, or ""
	// ReplaceGatewayConfig lets GatewayConfig replace an installed
	// gatewayd.toml that differs from it.
	ReplaceGatewayConfig bool
	Expect               string           // images.ids' digest as the owner took it, or ""
	Owners               ownership.Owners // who besides root may have written the inputs
	Start                bool
	UnitDir              string // /etc/systemd/system
	ImageRoot            string // /usr/local/lib/boxmaker/images
	CredDir              string // /etc/boxmaker/credentials
	Etc                  string // /etc (subuid and subgid; accounts come from getent)
}

// Values is every placeholder's value for the units, given the images.
func Values(o Options, im Images) (map[string]string, error) {
	host, err := checkNetworks(o)
	if err != nil {
		return nil, err
	}
	v := map[string]string{
		units.Podman:                 o.Podman,
		units.State:                  o.State,
		units.ConfigDir:              layout.Config.In(o.State),
		units.Net(layout.Inferproxy): host,
		units.Net(layout.Gatewayd):   strings.Join(strings.Fields(o.MattermostNet), " "),
		units.Net(layout.Memoryd):    strings.Join(strings.Fields(o.HonchoNet), " "),
	}
	for r, a := range im {
		v[units.Image(r)] = a.ID
		v[units.Root(r)] = rootOf(o, a.ID)
	}
	v[units.Bin(layout.Brokerd)] = filepath.Join(rootOf(o, im[layout.Brokerd].ID), "bin", layout.Brokerd)
	for _, c := range units.Credentials {
		v[units.CredentialPath(c.Name)] = filepath.Join(o.CredDir, c.Name+".cred")
	}
	return v, nil
}

// checkNetworks checks --llama (an ip:port; its host is returned) and
// each --mattermost-net and --honcho-net entry ([checkNet]).
func checkNetworks(o Options) (string, error) {
	// ParseAddrPort takes only a literal address and a decimal port; a
	// zone (%eth0) would be a specifier in the unit's text.
	ap, err := netip.ParseAddrPort(o.Llama)
	if err != nil || ap.Port() == 0 || ap.Addr().Zone() != "" {
		return "", Refusal{fmt.Sprintf("--llama %q is not ip:port: inferproxy's unit allows exactly that address", o.Llama), "see docs/runbook.md#install-network"}
	}
	host := ap.Addr().Unmap().String()
	if ap.Addr().IsUnspecified() {
		return "", Refusal{fmt.Sprintf("--llama %q is the unspecified address, no host's", o.Llama), "see docs/runbook.md#install-network-wide"}
	}
	var errs []error
	for _, f := range []struct{ flag, v string }{{"--mattermost-net", o.MattermostNet}, {"--honcho-net", o.HonchoNet}} {
		for _, a := range strings.Fields(f.v) {
			if err := checkNet(f.flag, a); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return "", errors.Join(errs...)
	}
	return host, nil
}

func rootOf(o Options, id string) string {
	return filepath.Join(o.ImageRoot, strings.TrimPrefix(id, "sha256:"))
}

// UnitFiles is each unit's text with the placeholders substituted, after
// units.Audit; gatewayd's only when it is configured; loading the
// optional credentials given (units.Table).
func UnitFiles(values map[string]string, gateway bool, given ...string) (map[string]string, []string, error) {
	files := map[string]string{}
	var order []string
	for _, u := range units.Table(given...) {
		if u.Role == layout.Gatewayd && !gateway {
			continue
		}
		if bad := units.Audit(&u); len(bad) > 0 {
			return nil, nil, Refusal{"unit table fails its own audit: " + strings.Join(bad, "; "), "see docs/runbook.md#install-unit-audit"}
		}
		text, err := units.Substitute(u.Text(), values)
		if err != nil {
			return nil, nil, err
		}
		files[u.Name] = text
		order = append(order, u.Name)
	}
	return files, order, nil
}

// runner runs host commands, printing each (never its stdin).
type runner struct {
	ctx context.Context
	out io.Writer
}

func (r runner) run(stdin []byte, argv ...string) ([]byte, error) {
	fmt.Fprintf(r.out, "+ %s\n", strings.Join(argv, " "))
	cmd := exec.CommandContext(r.ctx, argv[0], argv[1:]...)
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Dir = "/" // runuser keeps the directory, which a role user may not enter
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("install: %s: %v: %s", argv[0], err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Run installs. secrets are the credentials' plaintexts by name
// ([ReadSecrets]): the bot token exactly when gatewayd is installed,
// Honcho's key exactly when memoryd's config names it ([Needed]).
func Run(ctx context.Context, o Options, h Host, secrets map[string][]byte, out io.Writer) error {
	p, err := prepare(o, h, secrets)
	if err != nil {
		return err
	}
	r := runner{ctx, out}
	if err := makeUsers(r, o, p); err != nil {
		return err
	}
	if err := makeState(o, p); err != nil {
		return err
	}
	if err := unpack(o, p.im, out); err != nil {
		return err
	}
	if err := loadTool(r, o, p); err != nil {
		return err
	}
	if err := encrypt(r, o, secrets); err != nil {
		return err
	}
	for _, name := range p.order {
		if err := writeFile(filepath.Join(o.UnitDir, name), []byte(p.files[name]), 0o644); err != nil {
			return err
		}
	}
	if err := start(r, o, p, out); err != nil {
		return err
	}
	fmt.Fprintf(out, "installed %d units from %s; state in %s\n", len(p.order), o.Images, o.State)
	if p.gateway == nil {
		fmt.Fprintln(out, "gatewayd not installed: no --gateway-config (copy deploy/gatewayd.toml, then run bxctl install again with it and --token-stdin)")
	}
	return nil
}

// start reloads systemd, restarts the running units whose file, config
// or credential changed, and enables (and starts) every unit.
func start(r runner, o Options, p *plan, out io.Writer) error {
	if _, err := r.run(nil, "systemctl", "daemon-reload"); err != nil {
		return err
	}
	switch {
	case len(p.restart) > 0 && o.Start:
		// try-restart restarts only what runs: enable --now below
		// starts the rest, with the new files either way.
		if _, err := r.run(nil, append([]string{"systemctl", "try-restart"}, p.restart...)...); err != nil {
			return err
		}
	case len(p.restart) > 0:
		fmt.Fprintf(out, "not restarted (--no-start): %s; a running one keeps its old unit, image, config or credential until `systemctl restart`\n", strings.Join(p.restart, " "))
	}
	verb := []string{"systemctl", "enable"}
	if o.Start {
		verb = append(verb, "--now")
	}
	for _, name := range p.order {
		if _, err := r.run(nil, append(verb, name)...); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes p through a temporary file and a rename, so a unit is
// never read half written.
func writeFile(p string, b []byte, mode os.FileMode) error {
	tmp := p + ".bxctl-tmp"
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("install: write %s: %w", p, err)
	}
	_, werr := f.Write(b)
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("install: write %s: %w", p, err)
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return fmt.Errorf("install: write %s: %w", p, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("install: write %s: %w", p, err)
	}
	return nil
}
