package ownership

import (
	"flag"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// sandboxRoot is set by [TestOnlyTrustSandboxRoot].
var sandboxRoot atomic.Bool

// TestOnlyTrustSandboxRoot lets a package's tests, which write owner
// files under TMPDIR, run in the Nix build sandbox (docs/nix.md, "checks.gate
// in the sandbox"). There / is made by Nix as host root's (mode 0750, the
// nixbld group: NixOS/nix src/libstore/unix/build/chroot.cc at 88b09c64,
// lines 30-35) and the build's user namespace maps only the build user
// (linux-derivation-builder.cc lines 430-438, 631-636), so / reads as the
// kernel's overflow uid (nobody), and every owner file under TMPDIR
// (/build) fails the rule at /. After this call, and in a test binary only,
// [Owners.Check] accepts / as a directory on the way (never as the file
// itself) when it reads as the overflow uid and root is not mapped in this
// process's user namespace; everything below / is judged as ever, and / is
// still refused when its group or everyone may write it.
//
// A package calls it from an init in a _test.go file; checks/arch's TestOnly
// rule refuses a use from any other file, and the check panics outside a
// test binary. A daemon never trusts an unmapped /: it cannot tell who owns
// it.
func TestOnlyTrustSandboxRoot() { sandboxRoot.Store(true) }

// sandboxRootTrusted reports whether at, owned by uid, is a sandbox's /
// that [TestOnlyTrustSandboxRoot] told this test binary to trust.
func sandboxRootTrusted(at string, uid uint32) bool {
	if !sandboxRoot.Load() || at != "/" {
		return false
	}
	if flag.Lookup("test.v") == nil {
		panic("ownership.TestOnlyTrustSandboxRoot was called outside a test binary")
	}
	over, mapped := unmapped()
	return uid == over && !mapped
}

// unmapped is the kernel's overflow uid (what an unmapped owner reads as)
// and whether root is mapped in this process's user namespace; a file it
// cannot read counts as root mapped, so nothing is trusted by accident.
var unmapped = sync.OnceValues(func() (uint32, bool) {
	over := uint32(65534)
	if b, err := os.ReadFile("/proc/sys/kernel/overflowuid"); err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32); err == nil {
			over = uint32(n)
		}
	}
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return over, true
	}
	return over, rootMapped(string(b))
})

// rootMapped reports whether a uid_map (lines "inside outside count")
// maps uid 0 inside, or cannot be read.
func rootMapped(uidMap string) bool {
	for _, line := range strings.Split(uidMap, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			return true
		}
		inside, err1 := strconv.ParseUint(f[0], 10, 32)
		count, err2 := strconv.ParseUint(f[2], 10, 32)
		if err1 != nil || err2 != nil || inside == 0 && count > 0 {
			return true
		}
	}
	return false
}
