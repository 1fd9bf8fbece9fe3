package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// maxStateFile caps a state file; a longer one is unreadable, not data.
const maxStateFile = 4 << 10

// Fresh is the state of a session with no state file: the floor, trusted.
var Fresh = policy.Session{Taint: dataclass.Floor}

// worst is what an unreadable state is read as.
var worst = policy.Session{Taint: dataclass.Secret, Untrusted: true, Recalled: true}

// stateFile is the one form of broker/sessions/<id>.json. recalled is
// written only when true, so a file written before the field existed
// (a session that never recalled then, or whose recall the rebuild from
// the log restores) is still in canonical form.
type stateFile struct {
	Taint     dataclass.Class `json:"taint"`
	Untrusted bool            `json:"untrusted"`
	Recalled  bool            `json:"recalled,omitempty"`
}

// UnreadableError says why a session's state file could not be read. The
// session is then read as secret and untrusted, and brokerd denies its
// calls with state_unreadable.
type UnreadableError struct {
	Session string
	Path    string
	Err     error
}

func (e *UnreadableError) Error() string {
	return fmt.Sprintf("session %s: state file %s is unreadable, read as secret and untrusted: %v", e.Session, e.Path, e.Err)
}

func (e *UnreadableError) Unwrap() error { return e.Err }

// status is how a state file was found.
type status uint8

const (
	present    status = iota + 1 // read and valid
	missing                      // no file: a fresh session
	unreadable                   // anything else: read as worst
)

func statePath(dir, id string) string { return filepath.Join(dir, id+".json") }

// encodeState is the exact bytes of a state file: compact JSON and a
// newline. A file that is not byte for byte this is unreadable.
func encodeState(s policy.Session) ([]byte, error) {
	if !s.Taint.Valid() || s.Taint < dataclass.Floor {
		return nil, fmt.Errorf("encode session state: taint %v is below the floor", s.Taint)
	}
	b, err := strict.Marshal(stateFile{Taint: s.Taint, Untrusted: s.Untrusted, Recalled: s.Recalled})
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// readState reads session id's state. A missing file is [Fresh]; any
// other failure is worst, with an *UnreadableError.
func readState(dir, id string) (policy.Session, status, error) {
	path := statePath(dir, id)
	bad := func(err error) (policy.Session, status, error) {
		return worst, unreadable, &UnreadableError{Session: id, Path: path, Err: err}
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		// A missing directory is not a fresh session: it is a wrong
		// or removed path, and reading it as private would fail open.
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return bad(fmt.Errorf("state directory: %v", err))
		}
		return Fresh, missing, nil
	}
	if err != nil {
		return bad(err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return bad(fmt.Errorf("not a regular file (%v)", err))
	}
	b, err := io.ReadAll(io.LimitReader(f, maxStateFile+1))
	if err != nil {
		return bad(err)
	}
	if len(b) > maxStateFile {
		return bad(fmt.Errorf("over %d bytes", maxStateFile))
	}
	var sf stateFile
	if err := strict.Unmarshal(bytes.TrimSuffix(b, []byte("\n")), &sf); err != nil {
		return bad(err)
	}
	s := policy.Session{Taint: sf.Taint, Untrusted: sf.Untrusted, Recalled: sf.Recalled}
	want, err := encodeState(s)
	if err != nil {
		return bad(err)
	}
	if !bytes.Equal(b, want) {
		return bad(errors.New("not in canonical form"))
	}
	return s, present, nil
}

// testOnlyFail, when set, is called at each stage of a state write; an
// error it returns fails the write there.
var testOnlyFail func(stage string) error

func stage(name string) error {
	if testOnlyFail != nil {
		return testOnlyFail(name)
	}
	return nil
}

// writeState replaces session id's state file atomically: a temporary
// file in the same directory, written, fsynced and renamed over it, then
// the directory fsynced. Until the rename the old file is untouched; a
// failure before it removes the temporary file.
func writeState(dir, id string, s policy.Session) (err error) {
	b, err := encodeState(s)
	if err != nil {
		return err
	}
	path := statePath(dir, id)
	tmp, err := os.CreateTemp(dir, "."+id+".json.tmp-") // mode 0600
	if err != nil {
		return fmt.Errorf("write session state %s: %v", path, err)
	}
	renamed := false
	defer func() {
		if !renamed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
		if err != nil {
			err = fmt.Errorf("write session state %s: %v", path, err)
		}
	}()
	half := len(b) / 2
	if _, err := tmp.Write(b[:half]); err != nil {
		return err
	}
	if err := stage("write"); err != nil {
		return err
	}
	if _, err := tmp.Write(b[half:]); err != nil {
		return err
	}
	if err := stage("sync"); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := stage("rename"); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	renamed = true
	if err := stage("dirsync"); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// lockFile is held (flock, exclusive) by whoever writes the state files:
// brokerd's ledger for its lifetime, or a rebuild.
const lockFile = ".lock"

// cleanFile marks a clean shutdown: it holds the audit log's head (seq
// and hash) when the ledger closed with every state file up to date.
const cleanFile = ".clean"

func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock session state %s: %v", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock session state %s: held by another process (brokerd, or a rebuild): %v", dir, err)
	}
	return f, nil
}

// prepareDir creates the state directory (mode 0700) if it is missing and
// refuses one that is not a directory: a missing one is safe to create,
// because a start without the clean mark rebuilds every file from the log.
func prepareDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("session state dir: %v", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("session state dir: %v", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("session state dir %s is not a directory (a symbolic link is refused)", dir)
	}
	return nil
}

// stateFiles lists the session ids that have a state file in dir.
func stateFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if ok && wire.CheckSessionID(id) == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}
