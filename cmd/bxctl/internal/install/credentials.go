package install

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"wntrmute.dev/boxmaker/pkg/host/config"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd"
	"wntrmute.dev/boxmaker/pkg/host/units"
)

// MaxToken caps each credential read from stdin (a bot token, a JWT).
const MaxToken = 4096

// Stdin is how one credential of units.Credentials reaches bxctl install:
// a flag saying its plaintext is on stdin. Every credential comes the
// same way, so none is ever in an argument, the environment or a file.
type Stdin struct {
	Credential string
	Flag       string
	Usage      string
	Missing    string // the refusal when the install needs it and it is not given
	Anchor     string // the runbook entry of its refusals
}

// StdinFlags is one [Stdin] per credential, in units.Credentials' order,
// which is also the order of their lines on stdin.
var StdinFlags = []Stdin{
	{units.MattermostToken, "token-stdin",
		"read the Mattermost bot token from stdin (it is encrypted with systemd-creds, never written in clear)",
		"--gateway-config was given but no bot token arrived on stdin (--token-stdin)", "install-token"},
	{units.HonchoKey, "honcho-key-stdin",
		"read Honcho's key from stdin, on the line after the token's with --token-stdin (encrypted with systemd-creds like the token); memoryd.toml's [honcho] must say key = \"credential:honcho-key\"",
		"memoryd's config says key = \"credential:honcho-key\" but Honcho's key did not arrive on stdin (--honcho-key-stdin): memoryd would not start", "install-honcho-key"},
}

func stdinOf(name string) Stdin {
	for _, s := range StdinFlags {
		if s.Credential == name {
			return s
		}
	}
	panic("install: no stdin flag for credential " + name)
}

// ReadSecrets reads the plaintexts of the credentials named (those whose
// flag was given) from r: one line each, in [StdinFlags]' order, each
// non-empty and at most [MaxToken] bytes, a final newline optional. Any
// other shape is refused, so a key is never taken for a token nor a
// stray line for either.
func ReadSecrets(r io.Reader, names []string) (map[string][]byte, error) {
	var order []Stdin
	for _, s := range StdinFlags {
		for _, n := range names {
			if n == s.Credential {
				order = append(order, s)
			}
		}
	}
	if len(order) != len(names) {
		return nil, fmt.Errorf("install: read credentials: %q holds a name that is no credential", names)
	}
	if len(order) == 0 {
		return map[string][]byte{}, nil
	}
	var flags []string
	for _, s := range order {
		flags = append(flags, "--"+s.Flag)
	}
	refuse := func(what string) error {
		return Refusal{fmt.Sprintf("stdin %s; it must hold one line per credential flag, in this order: %s", what, strings.Join(flags, ", ")), "see docs/runbook.md#install-credential-stdin"}
	}
	limit := int64(len(order)) * (MaxToken + 2)
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, refuse(fmt.Sprintf("could not be read (%v)", err))
	}
	if int64(len(b)) > limit {
		return nil, refuse(fmt.Sprintf("holds over %d bytes", limit))
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != len(order) {
		return nil, refuse(fmt.Sprintf("holds %d lines, not %d", len(lines), len(order)))
	}
	out := map[string][]byte{}
	for i, s := range order {
		l := strings.TrimSuffix(lines[i], "\r")
		switch {
		case strings.TrimSpace(l) == "":
			return nil, refuse(fmt.Sprintf("line %d (--%s) is empty", i+1, s.Flag))
		case len(l) > MaxToken:
			return nil, refuse(fmt.Sprintf("line %d (--%s) is over %d bytes", i+1, s.Flag, MaxToken))
		}
		out[s.Credential] = []byte(l)
	}
	return out, nil
}

// honchoKeyRef is the [honcho] key of the memoryd.toml memoryd will read
// after this install: the state directory's (the owner's, left alone),
// or else its first config, which has no [honcho]. The file is read
// with memoryd's own loader (package roleconf/memoryd): one memoryd
// would refuse is refused here already.
func honchoKeyRef(o Options) (ref string, honcho bool, err error) {
	path := layout.ConfigPath(o.State, layout.Memoryd)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("install: read %s: %w", path, err)
	}
	if len(b) > config.MaxSize {
		return "", false, Refusal{fmt.Sprintf("%s is over %d bytes", path, config.MaxSize), "see docs/runbook.md#install-honcho-key"}
	}
	c, _, err := memoryd.Parse(b, path, o.State)
	if err != nil {
		return "", false, Refusal{fmt.Sprintf("memoryd would refuse %s, so whether it needs Honcho's key is unknown: %v", path, err), "see docs/runbook.md#install-honcho-key"}
	}
	f, ok := c.Fleet()
	switch {
	case !ok:
		return "", false, nil
	case !f.HasKey():
		return "", true, nil
	}
	return f.Key.String(), true, nil
}

// Needed checks the credentials given against what this install needs,
// before anything is changed: the bot token exactly when gatewayd is
// installed, Honcho's key exactly when memoryd's config names it as its
// credential. A credential given that no unit would load, or needed and
// not given, is refused; so is a [honcho] key kept anywhere but that
// credential (memoryd's unit has no environment, and a key file would be
// the key in clear on the disk). It returns the optional credentials the
// units must load.
func Needed(o Options, secrets map[string][]byte) ([]string, error) {
	ref, honcho, err := honchoKeyRef(o)
	if err != nil {
		return nil, err
	}
	cred := "credential:" + units.HonchoKey
	if ref != "" && ref != cred {
		return nil, Refusal{fmt.Sprintf("%s sets [honcho] key to something other than %q: the unit gives memoryd Honcho's key only as that credential (an env: has no environment to come from; a file: keeps the key in clear on the disk)",
			layout.ConfigPath(o.State, layout.Memoryd), cred), "see docs/runbook.md#install-honcho-key"}
	}
	// Why no unit would load each credential this install does not need.
	unused := map[string]string{}
	if o.GatewayConfig == "" {
		unused[units.MattermostToken] = "gatewayd is not installed (no --gateway-config)"
	}
	switch {
	case !honcho:
		unused[units.HonchoKey] = "memoryd's config has no [honcho]"
	case ref == "":
		unused[units.HonchoKey] = "memoryd's [honcho] has no key (a Honcho with its auth off)"
	}
	var given []string
	var errs []error
	for _, c := range units.Credentials {
		s := stdinOf(c.Name)
		_, has := secrets[c.Name]
		why, notNeeded := unused[c.Name]
		switch {
		case has && notNeeded:
			errs = append(errs, Refusal{fmt.Sprintf("--%s was given but no unit would load %s: %s", s.Flag, c.Name, why), "see docs/runbook.md#" + s.Anchor})
		case !has && !notNeeded:
			errs = append(errs, Refusal{s.Missing, "see docs/runbook.md#" + s.Anchor})
		case has && c.Optional:
			given = append(given, c.Name)
		}
	}
	return given, errors.Join(errs...)
}

// encrypt writes each credential given with systemd-creds (the host's
// key, or the TPM's when there is one), its plaintext on systemd-creds'
// stdin only.
func encrypt(r runner, o Options, secrets map[string][]byte) error {
	if err := os.MkdirAll(o.CredDir, 0o700); err != nil {
		return fmt.Errorf("install: credentials: %w", err)
	}
	if err := os.Chmod(o.CredDir, 0o700); err != nil {
		return fmt.Errorf("install: credentials: %w", err)
	}
	for _, c := range units.Credentials {
		plain, ok := secrets[c.Name]
		if !ok {
			continue
		}
		p := filepath.Join(o.CredDir, c.Name+".cred")
		if _, err := r.run(bytes.TrimRight(plain, "\r\n"), "systemd-creds", "encrypt", "--name="+c.Name, "-", p); err != nil {
			return err
		}
		if err := os.Chmod(p, 0o600); err != nil {
			return fmt.Errorf("install: credentials: %w", err)
		}
	}
	return nil
}
