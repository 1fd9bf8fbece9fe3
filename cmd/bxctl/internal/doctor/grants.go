package doctor

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"wntrmute.dev/boxmaker/pkg/host/ownership"
	"wntrmute.dev/boxmaker/pkg/host/secret"
	"wntrmute.dev/boxmaker/pkg/tool/grant"
)

// grants loads the grant directory with brokerd's own loader and
// ownership rule (root or owner_uid, else the uid running doctor, which
// is brokerd's under bxctl up), so a set doctor accepts is one brokerd
// accepts. It returns the set, nil when it did not load.
func (a *auditor) grants(in *install) *grant.Set {
	if !in.has("brokerd") {
		return nil
	}
	dir := in.broker.GrantsDir
	if dir == "" {
		a.add("doctor-grants", Problem, "brokerd has no grants directory")
		return nil
	}
	if err := isDir(dir); err != nil {
		a.add("doctor-grants", Problem, "grants/: %v", err)
		return nil
	}
	owners := ownership.Self()
	if in.broker.OwnerUID != nil {
		owners = ownership.Trust(*in.broker.OwnerUID)
	}
	set, err := grant.LoadDir(dir, owners)
	if err != nil {
		var le *grant.LoadError
		if errors.As(err, &le) {
			ps := make([]string, len(le.Problems))
			for i, p := range le.Problems {
				ps[i] = p.String()
			}
			a.add("doctor-grants", Problem, "%d problems in %s, so brokerd denies every call: %s", len(le.Problems), dir, strings.Join(ps, "; "))
			return nil
		}
		a.add("doctor-grants", Problem, "load %s: %v", dir, err)
		return nil
	}
	expired := 0
	for _, g := range set.Grants() {
		if !g.ActiveAt(a.opt.Now) {
			expired++
		}
	}
	msg := fmt.Sprintf("%d files, %d grants in %s, valid for brokerd (owners %s)", len(set.Files()), set.Len(), dir, owners)
	if set.Len() == 0 {
		msg += "; with none, every tool call is denied"
	}
	if expired > 0 {
		msg += fmt.Sprintf("; %d expired, which match nothing", expired)
	}
	a.add("doctor-grants", OK, "%s", msg)
	return set
}

// secrets warns for every secret kept in plaintext: an environment
// variable (readable in /proc/PID/environ by the same user, inherited by
// children) or a file. The systemd credential is the default for a
// reason: encrypted at rest, handed to the one service.
func (a *auditor) secrets(in *install) {
	// Each ref was parsed by its role's loader: one that is no ref is
	// already a doctor-config problem.
	refs := map[string]secret.Ref{} // where -> ref
	if in.has("brokerd") {
		for name, r := range in.broker.Secrets {
			refs["brokerd.toml [secrets] "+name] = r
		}
	}
	if in.gateway != nil && in.gateway.Token.Backend() != 0 {
		refs["gatewayd.toml token"] = in.gateway.Token
	}
	if s, ok := in.mem.Fleet(); ok && s.HasKey() {
		refs["memoryd.toml honcho.key"] = s.Key
	}
	where := make([]string, 0, len(refs))
	for w := range refs {
		where = append(where, w)
	}
	sort.Strings(where)
	var plain, bad []string
	for _, w := range where {
		r := refs[w]
		switch {
		case r.Backend() == secret.Env:
			plain = append(plain, fmt.Sprintf("%s is %s (plaintext in the environment)", w, r))
		case r.Backend() == secret.File:
			plain = append(plain, fmt.Sprintf("%s is %s (a plaintext file)", w, r))
			if fi, err := os.Stat(strings.TrimPrefix(r.String(), "file:")); err == nil && fi.Mode().Perm()&0o077 != 0 {
				bad = append(bad, fmt.Sprintf("%s: the file has mode %04o, readable by others", w, fi.Mode().Perm()))
			}
		}
	}
	switch {
	case len(bad) > 0:
		a.add("doctor-secrets", Problem, "%s", strings.Join(append(bad, plain...), "; "))
	case len(plain) > 0:
		a.add("doctor-secrets", Warn, "%s; systemd credentials keep them encrypted at rest", strings.Join(plain, "; "))
	default:
		a.add("doctor-secrets", OK, "%d secrets, each a systemd credential", len(refs))
	}
}

// isDir is nil when path is a directory (links followed). The loaders
// are called only on one: reading a named pipe in its place would block.
func isDir(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is a %s, not a directory", path, typeName(fi.Mode()))
	}
	return nil
}
