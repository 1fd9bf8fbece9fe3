package ownership

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// stranger is a uid no test trusts.
const stranger = 4242

// asRoot skips a test that must give a file to another uid.
func asRoot(t *testing.T) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("giving a file to another uid needs root")
	}
}

func write(t *testing.T, path string, mode os.FileMode) string {
	t.Helper()
	if err := os.WriteFile(path, []byte("x = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func mkdir(t *testing.T, path string, mode os.FileMode) string {
	t.Helper()
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func chown(t *testing.T, path string, uid int) {
	t.Helper()
	if err := os.Lchown(path, uid, -1); err != nil {
		t.Fatal(err)
	}
}

func wantUnsafe(t *testing.T, err error, at, reason string) {
	t.Helper()
	var ue *UnsafeError
	if !errors.As(err, &ue) {
		t.Fatalf("Check = %v, want an *UnsafeError at %s", err, at)
	}
	if ue.At != at || !strings.Contains(ue.Reason, reason) {
		t.Fatalf("Check = %v (at %s), want at %s with %q", err, ue.At, at, reason)
	}
	if !strings.HasSuffix(err.Error(), "see docs/runbook.md#owner-file-unsafe") {
		t.Fatalf("Check = %v: no runbook pointer", err)
	}
}

func TestTrust(t *testing.T) {
	o := Trust(1000, 0, 1000, 7)
	if !o.Has(0) || !o.Has(7) || !o.Has(1000) || o.Has(1) {
		t.Fatalf("Trust(1000, 0, 1000, 7) = %v", o)
	}
	if got := o.String(); got != "root or uid 7 or uid 1000" {
		t.Fatalf("String = %q", got)
	}
	if (Owners{}).Has(1) || !(Owners{}).Has(0) {
		t.Fatal("the zero Owners must trust root only")
	}
}

func TestCheckAccepts(t *testing.T) {
	dir := t.TempDir() // under /tmp: sticky, writable by everyone
	f := write(t, filepath.Join(dir, "a.toml"), 0o644)
	real, err := Self().Check(f)
	if err != nil || real != f {
		t.Fatalf("Check(%s) = %q, %v", f, real, err)
	}
	if _, err := Self().Check(dir); err != nil {
		t.Fatalf("Check(dir) = %v", err)
	}
	// A link to a trusted file elsewhere, and a path with "..".
	other := mkdir(t, filepath.Join(dir, "other"), 0o755)
	target := write(t, filepath.Join(other, "b.toml"), 0o600)
	link := filepath.Join(dir, "link.toml")
	if err := os.Symlink("other/b.toml", link); err != nil {
		t.Fatal(err)
	}
	if real, err := Self().Check(link); err != nil || real != target {
		t.Fatalf("Check(link) = %q, %v, want %s", real, err, target)
	}
	if real, err := Self().Check(filepath.Join(other, "..", "a.toml")); err != nil || real != f {
		t.Fatalf("Check(with ..) = %q, %v", real, err)
	}
	b, err := Self().ReadFile(link, 100)
	if err != nil || string(b) != "x = 1\n" {
		t.Fatalf("ReadFile(link) = %q, %v", b, err)
	}
}

// TestCheckRefuses is each way a file the owner did not write, or that
// someone else may change, reached brokerd before (issue 13 item 1).
func TestCheckRefuses(t *testing.T) {
	o := Self()
	t.Run("file writable by everyone", func(t *testing.T) {
		f := write(t, filepath.Join(t.TempDir(), "g.toml"), 0o666)
		_, err := o.Check(f)
		wantUnsafe(t, err, f, "writable by everyone (mode 0666)")
	})
	t.Run("file writable by its group", func(t *testing.T) {
		f := write(t, filepath.Join(t.TempDir(), "g.toml"), 0o664)
		_, err := o.Check(f)
		wantUnsafe(t, err, f, "writable by its group (mode 0664)")
	})
	t.Run("directory writable by everyone", func(t *testing.T) {
		d := mkdir(t, filepath.Join(t.TempDir(), "grants"), 0o777)
		_, err := o.Check(d)
		wantUnsafe(t, err, d, "writable by everyone (mode 0777)")
		// and so is every file in it
		f := write(t, filepath.Join(d, "g.toml"), 0o644)
		_, err = o.Check(f)
		wantUnsafe(t, err, d, "writable by everyone (mode 0777)")
	})
	t.Run("sticky directory judged as a whole", func(t *testing.T) {
		d := mkdir(t, filepath.Join(t.TempDir(), "grants"), 0o777|os.ModeSticky)
		_, err := o.Check(d)
		wantUnsafe(t, err, d, "writable by everyone (mode 1777)")
	})
	t.Run("parent writable by its group", func(t *testing.T) {
		p := mkdir(t, filepath.Join(t.TempDir(), "etc"), 0o775)
		d := mkdir(t, filepath.Join(p, "grants"), 0o755)
		f := write(t, filepath.Join(d, "g.toml"), 0o644)
		_, err := o.Check(f)
		wantUnsafe(t, err, p, "writable by its group (mode 0775)")
	})
	t.Run("link to a stranger's file", func(t *testing.T) {
		asRoot(t)
		dir := t.TempDir()
		home := mkdir(t, filepath.Join(dir, "home"), 0o755)
		target := write(t, filepath.Join(home, "evil.toml"), 0o644)
		chown(t, target, stranger)
		link := filepath.Join(dir, "g.toml")
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		_, err := o.Check(link)
		wantUnsafe(t, err, target, "owned by uid 4242, who is not root")
		if _, err := o.ReadFile(link, 100); !IsUnsafe(err) {
			t.Fatalf("ReadFile(link) = %v, want refused", err)
		}
	})
	t.Run("stranger's directory on the path", func(t *testing.T) {
		asRoot(t)
		d := mkdir(t, filepath.Join(t.TempDir(), "grants"), 0o755)
		chown(t, d, stranger)
		f := write(t, filepath.Join(d, "g.toml"), 0o644)
		_, err := o.Check(f)
		wantUnsafe(t, err, d, "owned by uid 4242")
	})
	t.Run("stranger's link in a sticky directory", func(t *testing.T) {
		asRoot(t)
		dir := t.TempDir()
		target := write(t, filepath.Join(dir, "good.toml"), 0o644)
		pub := mkdir(t, filepath.Join(dir, "pub"), 0o777|os.ModeSticky)
		link := filepath.Join(pub, "g.toml")
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		if _, err := o.Check(link); err != nil {
			t.Fatalf("Check(own link in a sticky dir) = %v", err)
		}
		chown(t, link, stranger)
		_, err := o.Check(link)
		wantUnsafe(t, err, link, "in a directory anyone may add to")
	})
	t.Run("trusted only by uid", func(t *testing.T) {
		if os.Getuid() == 0 {
			t.Skip("root's files are always trusted")
		}
		if fi, err := os.Stat("/"); err == nil && fi.Sys().(*syscall.Stat_t).Uid != 0 {
			t.Skip("/ is not root's here (in the Nix sandbox's user namespace it reads as nobody)")
		}
		f := write(t, filepath.Join(t.TempDir(), "g.toml"), 0o644)
		_, err := Trust().Check(f)
		wantUnsafe(t, err, filepath.Dir(f), "who is not root")
	})
}

// TestNixStore: a link into the store is accepted whatever the store's
// files look like, and a link out of the store is judged where it leads.
func TestNixStore(t *testing.T) {
	asRoot(t)
	dir := t.TempDir()
	mkdir(t, filepath.Join(dir, "nix"), 0o755)
	store := mkdir(t, filepath.Join(dir, "nix", "store"), 0o775|os.ModeSticky)
	old := storeDir
	storeDir = store
	t.Cleanup(func() { storeDir = old })

	pkg := mkdir(t, filepath.Join(store, "abc-grants"), 0o777)
	chown(t, pkg, stranger)
	target := write(t, filepath.Join(pkg, "g.toml"), 0o666)
	chown(t, target, stranger)
	grants := mkdir(t, filepath.Join(dir, "grants"), 0o755)
	link := filepath.Join(grants, "g.toml")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if real, err := Self().Check(link); err != nil || real != target {
		t.Fatalf("Check(link into the store) = %q, %v", real, err)
	}
	if _, err := Self().ReadFile(link, 100); err != nil {
		t.Fatalf("ReadFile(link into the store) = %v", err)
	}

	outside := write(t, filepath.Join(dir, "evil.toml"), 0o644)
	chown(t, outside, stranger)
	out := filepath.Join(pkg, "out.toml")
	if err := os.Symlink(outside, out); err != nil {
		t.Fatal(err)
	}
	link2 := filepath.Join(grants, "h.toml")
	if err := os.Symlink(out, link2); err != nil {
		t.Fatal(err)
	}
	_, err := Self().Check(link2)
	wantUnsafe(t, err, outside, "owned by uid 4242")

	// The store directory itself is judged: a store anyone may write is
	// no store.
	if err := os.Chmod(store, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := Self().Check(link); !IsUnsafe(err) {
		t.Fatalf("Check(link into a store writable by everyone) = %v, want refused", err)
	}
}

func TestCheckLookupErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Self().Check(filepath.Join(dir, "missing")); err == nil || IsUnsafe(err) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Check(missing) = %v, want not exist", err)
	}
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := errors.Join(os.Symlink(b, a), os.Symlink(a, b)); err != nil {
		t.Fatal(err)
	}
	if _, err := Self().Check(a); err == nil || !strings.Contains(err.Error(), "symbolic links") {
		t.Fatalf("Check(loop) = %v", err)
	}
	f := write(t, filepath.Join(dir, "f"), 0o644)
	if _, err := Self().Check(filepath.Join(f, "x")); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("Check(file/x) = %v", err)
	}
	if _, err := Self().ReadFile(f, 3); err == nil || !strings.Contains(err.Error(), "larger than 3 bytes") {
		t.Fatalf("ReadFile(over max) = %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Self().ReadFile(fifo, 3); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("ReadFile(fifo) = %v", err)
	}
}
