// Package vm is the VM test host: it builds a Debian 12 guest (systemd as
// PID 1, the unified cgroup v2 hierarchy, rootless Podman 5.8.2's run-time
// parts) from Debian's packages, boots it under qemu's software emulation
// with no network device, and gives tests a command channel into it
// (package channel, served by checks/vm/agent) and a scan of the whole
// guest for a canary ([FindCanary], checks/vm/canary).
//
// # Invariant
//
// A test that needs the VM never passes without one: [Start] skips with
// one line only when BOXMAKER_VM is not 1, or, outside CI, when this
// machine lacks root or a tool the build needs; with CI set a machine that
// cannot build or boot the guest fails the test. Every [Machine] a test
// starts is killed when the test ends ([Start]) or, for the guest a run's
// scenarios share ([Shared]), when the run ends, and the cached image is
// never written: qemu runs its disk with snapshot=on, so each boot starts
// from the same bytes. A scenario on the shared guest gets it from a
// snapshot whose fingerprint it must match ([Shared.Use]).
//
// # Cache
//
// What is slow is cached in $BOXMAKER_CACHE/vm (default
// ~/.cache/boxmaker/vm) under the hash of its inputs: the root filesystem
// (rootfs.sh, customize.sh, sources.sh, packages.txt, guest/) and, from
// it, the boot files (that key, the Podman and agent binaries, image.sh).
// A warm run only boots. See docs/vm.md.
package vm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"wntrmute.dev/boxmaker/checks/podmantest"
)

// Image is a bootable guest: the files [Boot] gives qemu.
type Image struct {
	Disk, Kernel, Initrd string
	// Built says what this call had to build: "" (all cached), "image"
	// or "rootfs+image"; Took is how long that took.
	Built string
	Took  time.Duration
}

// Tools are the programs a cold build and a boot need on this machine
// (checks/vm-setup installs them).
var Tools = []string{"qemu-system-x86_64", "mmdebstrap", "mke2fs", "go"}

// Build returns the guest image for this tree, building what the cache
// lacks. Its progress goes to log, a line at a time; the build scripts'
// own output goes to build.log in the cache directory (and the end of it
// into the error when a script fails). Concurrent builds (two test binaries)
// take turns on a lock in the cache directory.
func Build(ctx context.Context, log io.Writer) (Image, error) {
	start := time.Now()
	root, err := podmantest.RepoRoot()
	if err != nil {
		return Image{}, fmt.Errorf("build: %w", err)
	}
	here := filepath.Join(root, "checks", "vm")
	cache := os.Getenv("BOXMAKER_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return Image{}, fmt.Errorf("build: %w", err)
		}
		cache = filepath.Join(home, ".cache", "boxmaker")
	}
	podman, _, err := podmantest.Find() // the Podman checks/podman-setup built at go.mod's bindings version
	if err != nil {
		return Image{}, fmt.Errorf("build: %v; see docs/runbook.md#vm-host-unavailable", err)
	}
	dir := filepath.Join(cache, "vm")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Image{}, fmt.Errorf("build: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return Image{}, fmt.Errorf("build: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return Image{}, fmt.Errorf("build: lock %s: %w", lock.Name(), err)
	}

	out, err := os.Create(filepath.Join(dir, "build.log"))
	if err != nil {
		return Image{}, fmt.Errorf("build: %w", err)
	}
	defer out.Close()

	rootKey, err := hashInputs(here, "rootfs.sh", "customize.sh", "sources.sh", "packages.txt", "guest")
	if err != nil {
		return Image{}, fmt.Errorf("build: %w", err)
	}
	var built []string
	rootfs := filepath.Join(dir, "rootfs-"+rootKey[:16])
	if _, err := os.Stat(rootfs); err != nil {
		os.RemoveAll(rootfs + ".tmp") // an earlier build that died
		fmt.Fprintf(log, "vm: building the root filesystem %s (mmdebstrap; about a minute)\n", rootfs)
		if err := script(ctx, out, filepath.Join(here, "rootfs.sh"), rootfs); err != nil {
			return Image{}, err
		}
		built = append(built, "rootfs")
	}

	// The agent is built for every run (seconds) and keys the image by
	// its bytes, so a changed agent means a new image, not a stale one.
	tmp, err := os.MkdirTemp("", "boxmaker-vm-build-")
	if err != nil {
		return Image{}, fmt.Errorf("build: %w", err)
	}
	defer os.RemoveAll(tmp)
	agent := filepath.Join(tmp, "boxmaker-agent")
	if err := GoBuild(ctx, agent, "./checks/vm/agent"); err != nil {
		return Image{}, err
	}
	imgKey, err := hashInputs(here, "image.sh")
	if err != nil {
		return Image{}, fmt.Errorf("build: %w", err)
	}
	sum := sha256.New()
	io.WriteString(sum, rootKey+imgKey)
	for _, f := range []string{podman, agent} {
		if err := hashFile(sum, f); err != nil {
			return Image{}, fmt.Errorf("build: %w", err)
		}
	}
	key := hex.EncodeToString(sum.Sum(nil))
	img := filepath.Join(dir, "image-"+key[:16])
	if _, err := os.Stat(img); err != nil {
		os.RemoveAll(img + ".tmp")
		fmt.Fprintf(log, "vm: making the disk image %s\n", img)
		if err := script(ctx, out, filepath.Join(here, "image.sh"), rootfs, podman, agent, img); err != nil {
			return Image{}, err
		}
		built = append(built, "image")
	}
	prune(dir, filepath.Base(rootfs), filepath.Base(img))
	return Image{
		Disk: filepath.Join(img, "disk.img"), Kernel: filepath.Join(img, "vmlinuz"), Initrd: filepath.Join(img, "initrd.img"),
		Built: strings.Join(built, "+"), Took: time.Since(start),
	}, nil
}

// GoBuild builds the main package pkg (a path relative to the module's
// root) into out, statically (CGO_ENABLED=0), for the guest.
func GoBuild(ctx context.Context, out, pkg string) error {
	return goTool(ctx, "build", out, pkg, nil)
}

// GoTest compiles pkg's tests (go test -c) into out, statically, with the
// given build tags, so a test can copy them in ([Machine.Put]) and run
// them inside the guest: the way the runner's real-container tests reach
// rootless Podman under cgroup v2.
func GoTest(ctx context.Context, out, pkg string, tags ...string) error {
	return goTool(ctx, "test", out, pkg, append([]string{"-c"}, tagFlag(tags)...))
}

func tagFlag(tags []string) []string {
	if len(tags) == 0 {
		return nil
	}
	return []string{"-tags", strings.Join(tags, ",")}
}

func goTool(ctx context.Context, verb, out, pkg string, flags []string) error {
	root, err := podmantest.RepoRoot()
	if err != nil {
		return fmt.Errorf("go %s %s: %w", verb, pkg, err)
	}
	args := append(append([]string{verb}, flags...), "-trimpath", "-o", out, pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s %s: %v: %s", verb, pkg, err, b)
	}
	return nil
}

// script runs one of the build scripts, its output going to log.
func script(ctx context.Context, log io.Writer, path string, args ...string) error {
	var tail bytes.Buffer
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdout = io.MultiWriter(log, &tail)
	cmd.Stderr = cmd.Stdout
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		out := tail.String()
		if len(out) > 4000 {
			out = "..." + out[len(out)-4000:]
		}
		return fmt.Errorf("build: %s: %v (whole log: %s)\n%s", filepath.Base(path), err, logName(log), out)
	}
	return nil
}

// hashInputs hashes the named files and directories under dir: every
// regular file's path, mode and contents, in a fixed order.
func hashInputs(dir string, names ...string) (string, error) {
	var files []string
	for _, n := range names {
		err := filepath.WalkDir(filepath.Join(dir, n), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	sort.Strings(files)
	sum := sha256.New()
	for _, f := range files {
		fi, err := os.Lstat(f)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(dir, f)
		fmt.Fprintf(sum, "%s %o\n", rel, fi.Mode())
		if err := hashFile(sum, f); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}

func logName(w io.Writer) string {
	if f, ok := w.(*os.File); ok {
		return f.Name()
	}
	return "not kept"
}

func hashFile(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// prune removes the cache's other root filesystems and images: each is
// hundreds of megabytes, and only the current inputs' are ever used.
func prune(dir string, keep ...string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() || !(strings.HasPrefix(n, "rootfs-") || strings.HasPrefix(n, "image-")) {
			continue
		}
		kept := false
		for _, k := range keep {
			kept = kept || n == k
		}
		if !kept {
			os.RemoveAll(filepath.Join(dir, n))
		}
	}
}
