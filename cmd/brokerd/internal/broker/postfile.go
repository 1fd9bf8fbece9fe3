package broker

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/cmd/brokerd/internal/runner"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
)

// post_file runs here, in brokerd: the decided file is copied, whole or
// not at all, into the session's directory under outbox/ (layout.Outbox,
// which gatewayd reads), and loopd is told its id, which the turn's
// answer carries to gatewayd. brokerd opens the decided path itself,
// without following a link, and copies only a regular file within
// [MaxPostFile]; the copy, not the path, is what is posted, so a file
// changed after the decision cannot change what the chat gets.

// MaxPostFile caps a file post_file attaches (the fake's and a default
// Mattermost's limit is 100 MiB; Boxmaker's is smaller, as for files in).
const MaxPostFile = 10 << 20

// postFile carries out an allowed post_file.
func (b *Broker) postFile(seq int64, session string, d policy.Decision, src toolargs.Path) *wire.ToolResult {
	if b.cfg.StateDir == "" {
		return &wire.ToolResult{Status: wire.StatusFailed, Output: "post_file: brokerd has no state directory to put the file in", Label: dataclass.Label{Class: dataclass.Public}}
	}
	pf, err := copyOut(src, filepath.Join(layout.Outbox.In(b.cfg.StateDir), session), b.cfg.Protected())
	if err != nil {
		b.log.Warn("post_file failed", "decision", seq, "err", err.Error())
		return &wire.ToolResult{Status: wire.StatusFailed, Output: "post_file: " + err.Error(), Label: dataclass.Label{Class: dataclass.Public}}
	}
	out := fmt.Sprintf("%s (%d bytes) will be attached to this turn's answer in the chat", pf.Name, pf.Size)
	r := b.release(seq, out, 0, wire.StatusRan, d.Class(), d.Untrusted())
	if r.Status == wire.StatusRan {
		r.Posted = pf
	}
	return r
}

// copyOut copies src into dir under a new random id. src is opened with
// no link followed anywhere on its path (openat2 RESOLVE_NO_SYMLINKS):
// the decision matched its text, and a link planted in a granted
// directory (by an earlier shell or write call, or an MCP server's
// writable mount) would otherwise lead brokerd, reading as itself, to
// its own secrets, state or grants. With no link, the text is the file,
// and the runner's protected paths are refused as they are for mounts.
func copyOut(src toolargs.Path, dir string, protected []string) (*wire.PostedFile, error) {
	if q := runner.ProtectedHit(src.String(), protected); q != "" {
		return nil, fmt.Errorf("%s lies in %s, which brokerd keeps to itself: no grant posts it; see docs/runbook.md#post-file-refused", src, q)
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, src.String(), &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("%s has a link on its path, and post_file follows none; see docs/runbook.md#post-file-refused", src)
		}
		return nil, fmt.Errorf("%s could not be opened (%v)", src, err)
	}
	in := os.NewFile(uintptr(fd), src.String())
	defer in.Close()
	fi, err := in.Stat()
	switch {
	case err != nil || !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a regular file", src)
	case fi.Size() > MaxPostFile:
		return nil, fmt.Errorf("%s is %d bytes, over the cap of %d; see docs/runbook.md#post-file-refused", src, fi.Size(), MaxPostFile)
	}
	var raw [16]byte
	rand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	if err := os.Mkdir(dir, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("the outbox could not be made (%v)", err)
	}
	tmp, err := os.CreateTemp(dir, ".part-*")
	if err != nil {
		return nil, fmt.Errorf("the outbox could not be written (%v)", err)
	}
	defer os.Remove(tmp.Name()) // gone after the rename; a failure leaves nothing
	n, err := io.Copy(tmp, io.LimitReader(in, MaxPostFile+1))
	if err == nil && n > MaxPostFile {
		err = fmt.Errorf("it grew past the cap of %d", MaxPostFile)
	}
	if err == nil {
		err = tmp.Chmod(0o640)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, id))
	}
	if err != nil {
		return nil, fmt.Errorf("%s could not be copied to the outbox (%v)", src, err)
	}
	return &wire.PostedFile{ID: id, Name: filepath.Base(src.String()), Size: n}, nil
}
