package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"go.podman.io/common/pkg/seccomp"
	"golang.org/x/sys/unix"
)

// The system calls the tool profile takes out of Podman's default profile
// and decides itself: every way to make or enter a namespace. Podman's
// default allows all four to every container (rootless Podman in Podman
// needs them); Docker's default allows them only with CAP_SYS_ADMIN,
// which a tool container never has. Without them, `unshare -r` in a tool
// container gets uid 0 in a user namespace of its own, which reopens the
// kernel surface (mounts, netfilter, BPF of its own namespaces) most
// container escapes start from.
var nsSyscalls = []string{"clone", "clone3", "unshare", "setns"}

// cloneNamespaces are clone's flags that make a namespace (Docker's mask,
// 0x7E020000). unshareNamespaces adds CLONE_NEWTIME, which clone cannot
// ask for (its low byte is the exit signal) but unshare can.
const (
	cloneNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
		unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET
	unshareNamespaces = cloneNamespaces | unix.CLONE_NEWTIME
)

// s390 passes clone's flags second (Docker's profile has the same split).
var s390 = []string{"s390", "s390x"}

// toolProfile is the seccomp profile of every container the runner
// creates: Podman's own default (go.podman.io/common, at the version the
// bindings require) with nsSyscalls decided as Docker's default decides
// them for a container without CAP_SYS_ADMIN:
//   - clone is allowed only without a namespace flag, and refused with
//     EPERM with any;
//   - clone3 fails with ENOSYS: its flags are in a struct in memory,
//     which seccomp cannot read, and ENOSYS makes the C library (glibc's
//     pthread_create, posix_spawn) fall back to clone, whose flags it can;
//   - unshare is allowed only without a namespace flag (CLONE_FILES,
//     CLONE_FS, CLONE_SYSVSEM stay), EPERM with any;
//   - setns fails with EPERM.
//
// Everything else is Podman's default, whose default action (ENOSYS for
// a system call it does not name) stays.
func toolProfile() *seccomp.Seccomp {
	prof := seccomp.DefaultProfile()
	var kept []*seccomp.Syscall
	for _, rule := range prof.Syscalls {
		rule.Names = slices.DeleteFunc(rule.Names, func(n string) bool { return slices.Contains(nsSyscalls, n) })
		if slices.Contains(nsSyscalls, rule.Name) {
			rule.Name = ""
		}
		if len(rule.Names) > 0 || rule.Name != "" {
			kept = append(kept, rule)
		}
	}
	eperm, enosys := uint(unix.EPERM), uint(unix.ENOSYS)
	// flagRules allows name when argument arg holds none of mask's bits
	// and refuses it with EPERM for each bit it holds. (One refusal per
	// bit: seccomp compares an argument under a mask for equality only.)
	flagRules := func(name string, arg uint, mask uint64, f seccomp.Filter, exclude seccomp.Filter) []*seccomp.Syscall {
		rules := []*seccomp.Syscall{{
			Names: []string{name}, Action: seccomp.ActAllow,
			Args:     []*seccomp.Arg{{Index: arg, Value: mask, ValueTwo: 0, Op: seccomp.OpMaskedEqual}},
			Comment:  fmt.Sprintf("boxmaker: %s without a namespace flag", name),
			Includes: f, Excludes: exclude,
		}}
		for bit := uint64(1); bit != 0; bit <<= 1 {
			if mask&bit != 0 {
				rules = append(rules, &seccomp.Syscall{
					Names: []string{name}, Action: seccomp.ActErrno, Errno: "EPERM", ErrnoRet: &eperm,
					Args:     []*seccomp.Arg{{Index: arg, Value: bit, ValueTwo: bit, Op: seccomp.OpMaskedEqual}},
					Comment:  fmt.Sprintf("boxmaker: %s with namespace flag %#x", name, bit),
					Includes: f, Excludes: exclude,
				})
			}
		}
		return rules
	}
	kept = append(kept, flagRules("clone", 0, cloneNamespaces, seccomp.Filter{}, seccomp.Filter{Arches: s390})...)
	kept = append(kept, flagRules("clone", 1, cloneNamespaces, seccomp.Filter{Arches: s390}, seccomp.Filter{})...)
	kept = append(kept, flagRules("unshare", 0, unshareNamespaces, seccomp.Filter{}, seccomp.Filter{})...)
	kept = append(kept,
		&seccomp.Syscall{Names: []string{"clone3"}, Action: seccomp.ActErrno, Errno: "ENOSYS", ErrnoRet: &enosys, Args: []*seccomp.Arg{},
			Comment: "boxmaker: clone3's flags cannot be filtered; ENOSYS makes callers fall back to clone"},
		&seccomp.Syscall{Names: []string{"setns"}, Action: seccomp.ActErrno, Errno: "EPERM", ErrnoRet: &eperm, Args: []*seccomp.Arg{},
			Comment: "boxmaker: no entering another namespace"},
	)
	prof.Syscalls = kept
	return prof
}

// seccompFile is the profile's file in the runner's work directory. The
// Podman service reads a profile by path (its API cannot carry one, nor
// name its built-in default), from the same host: brokerd writes it once
// at start, in a directory only brokerd's user can enter (Podman runs as
// root or as that user).
const seccompFile = "seccomp.json"

// writeProfile writes toolProfile to dir, replacing any earlier file
// whole, and returns its path.
func writeProfile(dir string) (string, error) {
	b, err := json.MarshalIndent(toolProfile(), "", "\t")
	if err != nil {
		return "", fmt.Errorf("write seccomp profile: %w", err)
	}
	f, err := os.CreateTemp(dir, ".seccomp-*.json")
	if err != nil {
		return "", fmt.Errorf("write seccomp profile: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	path := filepath.Join(dir, seccompFile)
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return "", fmt.Errorf("write seccomp profile: %w", err)
	}
	return path, nil
}
