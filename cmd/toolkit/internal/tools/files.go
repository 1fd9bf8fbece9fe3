package tools

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
)

// private reports whether p lies in the call's private runtime
// directories (the secret's tmpfs, the egress socket's directory), which
// read_file and write_file never touch, whatever a grant says: the secret
// reaches a command only through the file the shell tool names.
func private(env Env, p string) bool {
	for _, dir := range []string{filepath.Dir(env.SecretDir), filepath.Dir(env.EgressSocket)} {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

// readFile prints a regular file's bytes, refusing files over MaxRead.
// It opens without blocking, so a FIFO cannot hang the call.
func readFile(env Env, a toolargs.ReadFile) error {
	p := a.Path.String()
	if private(env, p) {
		return failf("read %s: the call's private runtime directory is not readable by tools; see docs/runbook.md#toolkit-runtime-dirs", p)
	}
	f, err := os.OpenFile(p, os.O_RDONLY|nonBlock, 0)
	if err != nil {
		return failf("read %s: %v", p, plainErr(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return failf("read %s: %v", p, plainErr(err))
	}
	if !fi.Mode().IsRegular() {
		return failf("read %s: not a regular file (%s)", p, fi.Mode().Type())
	}
	if fi.Size() > MaxRead {
		return failf("read %s: the file is %d bytes, over the %d-byte limit; read part of it with the shell tool (head -c)", p, fi.Size(), MaxRead)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxRead+1))
	if err != nil {
		return failf("read %s: %v", p, plainErr(err))
	}
	if len(b) > MaxRead {
		return failf("read %s: the file grew past the %d-byte limit while being read", p, MaxRead)
	}
	if _, err := env.Stdout.Write(b); err != nil {
		return failf("read %s: writing the result: %v", p, err)
	}
	return nil
}

// writeFile creates or replaces a file: the content goes to a temporary
// file in the same directory, is synced, and is renamed over the target,
// then the directory is synced. A replaced file keeps its permission
// bits; a new one gets 0644.
func writeFile(env Env, a toolargs.WriteFile) (err error) {
	p := a.Path.String()
	if private(env, p) {
		return failf("write %s: the call's private runtime directory is not writable by tools; see docs/runbook.md#toolkit-runtime-dirs", p)
	}
	dir := filepath.Dir(p)
	mode := fs.FileMode(0o644)
	switch fi, err := os.Lstat(p); {
	case err == nil && fi.Mode().IsRegular():
		mode = fi.Mode().Perm()
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		return failf("write %s: it is a symbolic link; write to the file it points to", p)
	case err == nil:
		return failf("write %s: not a regular file (%s)", p, fi.Mode().Type())
	case !errors.Is(err, fs.ErrNotExist):
		return failf("write %s: %v", p, plainErr(err))
	}
	tmp, err := os.CreateTemp(dir, ".boxmaker-write-*")
	if err != nil {
		return failf("write %s: %v", p, plainErr(err))
	}
	defer func() {
		if err != nil {
			os.Remove(tmp.Name())
		}
	}()
	if _, err := io.WriteString(tmp, a.Content); err != nil {
		tmp.Close()
		return failf("write %s: %v", p, plainErr(err))
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return failf("write %s: %v", p, plainErr(err))
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return failf("write %s: %v", p, plainErr(err))
	}
	if err := tmp.Close(); err != nil {
		return failf("write %s: %v", p, plainErr(err))
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return failf("write %s: %v", p, plainErr(err))
	}
	if d, err := os.Open(dir); err == nil {
		serr := d.Sync()
		d.Close()
		if serr != nil {
			return failf("write %s: syncing the directory: %v", p, serr)
		}
	}
	fmt.Fprintf(env.Stdout, "wrote %d bytes to %s\n", len(a.Content), p)
	return nil
}

// plainErr drops the operation and path that *fs.PathError repeats.
func plainErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}
