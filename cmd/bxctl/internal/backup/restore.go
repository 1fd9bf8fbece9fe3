package backup

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/ownership"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/logs/consultlog"
	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/text/sanitize"
	"wntrmute.dev/boxmaker/pkg/tool/grant"
)

const noFollow = syscall.O_NOFOLLOW

// Anchors gives the owner's anchors of the log whose directory (as the
// anchors name it) is log.
type Anchors func(log string) ([]audit.Anchor, error)

// Options are what a restore checks the backup against, none of it
// taken from the backup.
type Options struct {
	// Anchors gives the owner's anchors of a log.
	Anchors Anchors
	// From is the state directory the backup is of, as the one
	// restoring knows it: its logs' anchors are the ones checked. The
	// manifest's own idea of its source is never used for this, since
	// anyone who can edit a backup can edit its manifest.
	From string
	// NoAnchors allows a restore that checks no anchor: the owner has
	// none of the logs under From. It never skips an anchor there is.
	NoAnchors bool
}

// Restored is what a restore verified.
type Restored struct {
	Manifest     *Manifest
	AuditSeq     int64 // the restored audit log's last seq
	ConsultLines int
	Anchors      int // the owner's anchors checked
	SessionLogs  int
	Grants       int
	// Outbox is the messages the restored fleet outbox has yet to send.
	Outbox int
	// Moved are the configs whose paths were moved from the backup's
	// state directory to the restored one.
	Moved []string
}

// identity are the memory files memoryd puts in every prompt, which must
// pass the write check as a whole (memoryd checks them so at each epoch).
var identity = []string{"soul.md", "memory.md", "user.md"}

// Restore restores the backup in src into state, which must be missing or
// an empty directory: it checks every file against the manifest, writes
// them into a new directory beside state, verifies what it wrote, gives
// each entry the table's owner (as root, with a user per role), and only
// then renames it into place. Nothing is left at state on a failure.
func Restore(src, state string, o Options) (*Restored, error) {
	state = filepath.Clean(state)
	if ents, err := os.ReadDir(state); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("restore: %s is not empty: restore goes only into a new or empty directory, never over a state; see docs/runbook.md#restore-not-empty", state)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("restore: %w; see docs/runbook.md#restore-not-empty", err)
	}
	m, err := ReadManifest(src)
	if err != nil {
		return nil, err
	}
	if m.Format > layout.Format {
		return nil, fmt.Errorf("restore: the backup is of format %d, newer than the %d this bxctl knows: restore it with the Boxmaker that took it; see docs/runbook.md#state-newer", m.Format, layout.Format)
	}
	if err := m.CheckFiles(src); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(state), filepath.Base(state)+".restore-")
	if err != nil {
		return nil, fmt.Errorf("restore: %w; see docs/runbook.md#restore-not-empty", err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	if err := m.write(src, tmp); err != nil {
		return nil, err
	}
	r := &Restored{Manifest: m}
	if r.Moved, err = moveConfigs(tmp, m.Source, state); err != nil {
		return nil, err
	}
	if err := r.verify(tmp, o); err != nil {
		return nil, err
	}
	if err := give(tmp, m); err != nil {
		return nil, err
	}
	if err := os.Remove(state); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("restore: %w", err)
	}
	if err := os.Rename(tmp, state); err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	done = true
	return r, nil
}

// write copies the backup's files into dir (checking each hash again as
// it is read), private to the one restoring: their modes are the layout
// table's, set by give, never the manifest's.
func (m *Manifest) write(src, dir string) error {
	if err := os.Chmod(dir, 0o711); err != nil {
		return err
	}
	for _, d := range m.Dirs {
		if err := os.Mkdir(filepath.Join(dir, d.Path), 0o700); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
	}
	for _, f := range m.Files {
		name := path.Join(FilesDir, f.Path)
		b, err := readFile(filepath.Join(src, name), f.Size)
		if err != nil {
			return corrupt(name, "cannot be read: %v", err)
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != f.SHA256 {
			return corrupt(name, "changed while it was restored")
		}
		if err := os.WriteFile(filepath.Join(dir, f.Path), b, 0o600); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
	}
	return nil
}

// readFile reads the regular file at p, never through a link and without
// waiting on a FIFO, and refuses it if it holds more than size bytes: a
// backup's file may have been swapped since it was checked.
func readFile(p string, size int64) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|noFollow|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	b, err := io.ReadAll(io.LimitReader(f, size+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > size {
		return nil, fmt.Errorf("%s holds more than its %d bytes", p, size)
	}
	return b, nil
}

// tableMode is the layout table's mode under u for the restored path p:
// an entry's own mode for the entry (and for a directory below a
// directory entry), the entry's files' mode for a file in it.
func tableMode(p string, dir bool, u layout.Users) fs.FileMode {
	e := entryOf(p)
	switch {
	case dir || p == e.Path:
		return e.ModeFor(u)
	case e.Files != 0:
		return e.FilesFor(u)
	}
	return 0o600
}

// moveConfigs rewrites the backup's state directory to the restored one
// in each config's quoted paths, when the two differ: a config written
// before the paths left the configs names the state directory's own
// (the layout table's), which its role accepts only if they are still
// the table's in the restored directory (docs/runbook.md#layout-key-moved).
func moveConfigs(dir, from, to string) ([]string, error) {
	if from == to {
		return nil, nil
	}
	var moved []string
	cfgs, _ := filepath.Glob(layout.ConfigGlob(dir))
	for _, c := range cfgs {
		b, err := os.ReadFile(c)
		if err != nil {
			return nil, fmt.Errorf("restore: %w", err)
		}
		s := string(b)
		t := strings.ReplaceAll(strings.ReplaceAll(s, `"`+from+`/`, `"`+to+`/`), `"`+from+`"`, `"`+to+`"`)
		if t == s {
			continue
		}
		fi, _ := os.Stat(c)
		if err := os.WriteFile(c, []byte(t), fi.Mode().Perm()); err != nil {
			return nil, fmt.Errorf("restore: %w", err)
		}
		moved = append(moved, "config/"+filepath.Base(c))
	}
	return moved, nil
}

// verify checks the restored directory dir: the audit and consult logs
// (chains, heads, links, and the owner's anchors of the logs under
// o.From), every session log decoded strictly, the identity files
// against the write check, and the grants loaded.
func (r *Restored) verify(dir string, o Options) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("restore: "+format+"; nothing was restored; see docs/runbook.md#restore-verify", args...)
	}
	from, err := filepath.Abs(o.From)
	if err != nil || o.From == "" {
		return fmt.Errorf("restore: no source state directory to check the owner's anchors against (%v); see docs/runbook.md#restore-anchors", err)
	}
	auditKey, consultKey := resolved(layout.Audit.In(from)), resolved(layout.ConsultLog.In(from))
	aa, err := o.Anchors(auditKey)
	if err != nil {
		return fail("the owner's anchors: %v", err)
	}
	ca, err := o.Anchors(consultKey)
	if err != nil {
		return fail("the owner's anchors: %v", err)
	}
	if err := heldIfAnchored(dir, &layout.Audit, auditKey, len(aa)); err != nil {
		return err
	}
	if err := heldIfAnchored(dir, &layout.ConsultLog, consultKey, len(ca)); err != nil {
		return err
	}
	if _, statErr := os.Lstat(layout.Audit.In(dir)); statErr == nil {
		ae := audit.VerifyEnd(layout.Audit.In(dir), aa)
		if !ae.OK() {
			why := fmt.Sprintf("%d of the owner's anchors fail", len(ae.AnchorProblems))
			if ae.Report.Problem != nil {
				why = ae.Report.Problem.Error()
			} else if ae.HeadProblem != nil {
				why = ae.HeadProblem.Error()
			}
			return fail("the audit log does not verify: %s", why)
		}
		r.AuditSeq, r.Anchors = ae.LastSeq, ae.Anchors
	}
	if _, statErr := os.Lstat(layout.ConsultLog.In(dir)); statErr == nil {
		ce := consultlog.VerifyEnd(layout.ConsultLog.In(dir), layout.Audit.In(dir), ca)
		if !ce.OK() {
			why := fmt.Sprintf("%d of the owner's anchors fail", len(ce.AnchorProblems))
			if ce.Report.Problem != nil {
				why = ce.Report.Problem.Error()
			} else if ce.HeadProblem != nil {
				why = ce.HeadProblem.Error()
			}
			return fail("the consult log does not verify: %s", why)
		}
		r.ConsultLines, r.Anchors = ce.Lines, r.Anchors+ce.Anchors
	}
	if r.Anchors == 0 && !o.NoAnchors {
		return fmt.Errorf("restore: none of your anchors name %s or %s, the logs of %s this backup is to be of, so nothing ties the backup to the logs you anchored: give --from with the state directory it was taken of, or --no-anchors if you never anchored that state; nothing was restored; see docs/runbook.md#restore-anchors", auditKey, consultKey, from)
	}
	files, err := sessionlog.Files(layout.Sessions.In(dir))
	if err != nil {
		return fail("the session logs: %v", err)
	}
	for _, f := range files {
		if err := sessionlog.Scan(f, func(int, sessionlog.Record, sessionlog.Trust) error { return nil }); err != nil {
			return fail("a session log does not decode: %v", err)
		}
	}
	r.SessionLogs = len(files)
	if r.Outbox, err = checkOutbox(dir); err != nil {
		return fail("the fleet outbox (%s): %v", OutboxPath, err)
	}
	for _, name := range identity {
		b, err := os.ReadFile(filepath.Join(layout.Memory.In(dir), name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fail("memory/%s: %v", name, err)
		}
		if err := sanitize.Check(string(b)); err != nil {
			return fail("memory/%s fails the write check: %v", name, err)
		}
	}
	if _, err := os.Stat(layout.Grants.In(dir)); err == nil {
		set, err := grant.LoadDir(layout.Grants.In(dir), ownership.Self())
		if err != nil {
			return fail("the grants do not load: %v", err)
		}
		r.Grants = set.Len()
	}
	return nil
}

// heldIfAnchored refuses a backup without the log of entry e when the
// owner has n anchors of it (key): a log left out of a backup would
// otherwise be verified against nothing.
func heldIfAnchored(dir string, e *layout.Entry, key string, n int) error {
	if n == 0 {
		return nil
	}
	if _, err := os.Lstat(e.In(dir)); err != nil {
		return fmt.Errorf("restore: you have %d anchor(s) of %s, but the backup holds no %s: a backup of that state without its log is refused; nothing was restored; see docs/runbook.md#restore-anchors", n, key, e.Path)
	}
	return nil
}

// give gives every restored entry the table's owner and group, as root
// with a user per role (the restored users.toml), and the table's mode,
// then makes the rest of the tree as bxctl up does.
func give(dir string, m *Manifest) error {
	users, err := layout.LoadUsers(dir)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if os.Geteuid() == 0 && !users.Single() {
		for _, p := range append(dirPaths(m), filePaths(m)...) {
			e := entryOf(p)
			owner := e.Owner
			if e == &layout.Grants || e == &layout.MCP || e == &layout.Logs || e == &layout.Jobs || e == &layout.Config {
				owner = layout.Owner
			}
			uid, gid := users.Of(owner).UID, users.Of(e.GroupRole()).GID
			if err := os.Lchown(filepath.Join(dir, p), int(uid), int(gid)); err != nil {
				return fmt.Errorf("restore: %w", err)
			}
		}
	}
	// After the owners: a change of owner may clear setgid.
	for _, d := range m.Dirs {
		if err := os.Chmod(filepath.Join(dir, d.Path), tableMode(d.Path, true, users)); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
	}
	for _, f := range m.Files {
		if err := os.Chmod(filepath.Join(dir, f.Path), tableMode(f.Path, false, users)); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
	}
	if err := layout.Make(dir, users); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	return nil
}

func dirPaths(m *Manifest) []string {
	var out []string
	for _, d := range m.Dirs {
		out = append(out, d.Path)
	}
	return out
}

func filePaths(m *Manifest) []string {
	var out []string
	for _, f := range m.Files {
		out = append(out, f.Path)
	}
	return out
}

// entryOf is the table's deepest entry holding p.
func entryOf(p string) *layout.Entry {
	best := &layout.State
	for _, e := range layout.Table {
		if (p == e.Path || strings.HasPrefix(p, e.Path+"/")) && len(e.Path) > len(best.Path) {
			best = e
		}
	}
	return best
}
