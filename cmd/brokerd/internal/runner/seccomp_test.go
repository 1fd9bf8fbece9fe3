package runner

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.podman.io/common/pkg/seccomp"
	"golang.org/x/sys/unix"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
)

// TestToolProfileDecidesNamespaces: the written profile is Podman's
// default but for clone, clone3, unshare and setns, which only the
// runner's own rules name: clone and unshare allowed without a namespace
// flag and refused (EPERM) for each, clone3 ENOSYS, setns EPERM.
func TestToolProfileDecidesNamespaces(t *testing.T) {
	dir := t.TempDir()
	path, err := writeProfile(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o644 || path != filepath.Join(dir, seccompFile) {
		t.Fatalf("profile file %s: %v, %v", path, st, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".seccomp-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	b, _ := os.ReadFile(path)
	var prof seccomp.Seccomp
	if err := json.Unmarshal(b, &prof); err != nil {
		t.Fatal(err)
	}
	def := seccomp.DefaultProfile()
	if prof.DefaultAction != def.DefaultAction || *prof.DefaultErrnoRet != *def.DefaultErrnoRet || len(prof.ArchMap) != len(def.ArchMap) {
		t.Errorf("default action %s %d, want Podman's %s %d", prof.DefaultAction, *prof.DefaultErrnoRet, def.DefaultAction, *def.DefaultErrnoRet)
	}
	// Every other system call Podman's default allows is still allowed.
	allowed := func(p *seccomp.Seccomp) map[string]bool {
		m := map[string]bool{}
		for _, r := range p.Syscalls {
			if r.Action == seccomp.ActAllow && len(r.Args) == 0 && len(r.Includes.Caps) == 0 {
				for _, n := range r.Names {
					m[n] = true
				}
			}
		}
		return m
	}
	got, want := allowed(&prof), allowed(def)
	for n := range want {
		if !got[n] && !slices.Contains(nsSyscalls, n) {
			t.Errorf("%s no longer allowed", n)
		}
	}
	for _, n := range nsSyscalls {
		if got[n] {
			t.Errorf("%s allowed without condition", n)
		}
	}
	type rule struct {
		action     seccomp.Action
		errno      uint
		arg        uint
		mask, want uint64
		s390       bool
	}
	rules := map[string][]rule{}
	for _, r := range prof.Syscalls {
		for _, n := range append(slices.Clone(r.Names), r.Name) {
			if !slices.Contains(nsSyscalls, n) {
				continue
			}
			x := rule{action: r.Action, s390: slices.Contains(r.Includes.Arches, "s390x")}
			if r.ErrnoRet != nil {
				x.errno = *r.ErrnoRet
			}
			if len(r.Args) == 1 {
				a := r.Args[0]
				if a.Op != seccomp.OpMaskedEqual {
					t.Errorf("%s: op %s", n, a.Op)
				}
				x.arg, x.mask, x.want = a.Index, a.Value, a.ValueTwo
			} else if len(r.Args) > 1 {
				t.Errorf("%s: %d conditions", n, len(r.Args))
			}
			if len(r.Includes.Caps)+len(r.Excludes.Caps) > 0 {
				t.Errorf("%s: a rule that depends on capabilities", n)
			}
			rules[n] = append(rules[n], x)
		}
	}
	// decide is what the rules answer for name called with flags.
	decide := func(name string, flags uint64, s390 bool) (seccomp.Action, uint) {
		var hits []rule
		for _, r := range rules[name] {
			if r.s390 != s390 && name == "clone" {
				continue
			}
			if r.mask == 0 || flags&r.mask == r.want {
				hits = append(hits, r)
			}
		}
		if len(hits) == 0 {
			return def.DefaultAction, *def.DefaultErrnoRet
		}
		for _, h := range hits[1:] {
			if h.action != hits[0].action || h.errno != hits[0].errno {
				t.Errorf("%s %#x: rules disagree: %+v", name, flags, hits)
			}
		}
		return hits[0].action, hits[0].errno
	}
	thread := uint64(unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD | unix.CLONE_SYSVSEM)
	for _, tt := range []struct {
		name   string
		flags  uint64
		action seccomp.Action
		errno  uint
	}{
		{"clone", thread, seccomp.ActAllow, 0},
		{"clone", unix.CLONE_VFORK | unix.CLONE_VM | unix.CLONE_PIDFD | uint64(unix.SIGCHLD), seccomp.ActAllow, 0},
		{"clone", unix.CLONE_NEWUSER | uint64(unix.SIGCHLD), seccomp.ActErrno, uint(unix.EPERM)},
		{"clone", unix.CLONE_NEWNET, seccomp.ActErrno, uint(unix.EPERM)},
		{"clone", unix.CLONE_NEWNS | unix.CLONE_NEWPID, seccomp.ActErrno, uint(unix.EPERM)},
		{"unshare", unix.CLONE_FILES | unix.CLONE_FS, seccomp.ActAllow, 0},
		{"unshare", unix.CLONE_NEWUSER, seccomp.ActErrno, uint(unix.EPERM)},
		{"unshare", unix.CLONE_NEWTIME, seccomp.ActErrno, uint(unix.EPERM)},
		{"unshare", unix.CLONE_NEWUSER | unix.CLONE_NEWNET | unix.CLONE_NEWNS, seccomp.ActErrno, uint(unix.EPERM)},
		{"clone3", 0, seccomp.ActErrno, uint(unix.ENOSYS)},
		{"setns", 0, seccomp.ActErrno, uint(unix.EPERM)},
		{"setns", unix.CLONE_NEWUSER, seccomp.ActErrno, uint(unix.EPERM)},
	} {
		for _, s390 := range []bool{false, true} {
			if a, e := decide(tt.name, tt.flags, s390); a != tt.action || e != tt.errno {
				t.Errorf("%s(%#x) s390 %v = %s %d, want %s %d", tt.name, tt.flags, s390, a, e, tt.action, tt.errno)
			}
		}
	}
}

// TestCreateNeedsTheProfile: a spec that does not name the runner's
// profile (containers.conf's would apply) is refused before Podman is
// asked.
func TestCreateNeedsTheProfile(t *testing.T) {
	p, err := New(Config{Runner: brokerd.Runner{PodmanSocket: "/nonexistent/p.sock", ToolImage: testImage}}, "i", t.TempDir(), nil, nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	d := decide(t, autoGrant("s", "shell", []string{"/srv"}), "shell", map[string]string{"command": "true", "workdir": "/srv"})
	s := p.cfg.toolSpec("i", d, "")
	if s.SeccompProfilePath != p.cfg.seccompProfile || s.SeccompPolicy != "default" {
		t.Fatalf("spec profile %q policy %q, want %q", s.SeccompProfilePath, s.SeccompPolicy, p.cfg.seccompProfile)
	}
	s.SeccompProfilePath = ""
	if _, err := p.create(t.Context(), s); err == nil || !errors.Is(err, ErrIsolation) {
		t.Errorf("create without the profile = %v", err)
	}
}
