package sessionlog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"syscall"

	"wntrmute.dev/boxmaker/pkg/logs/jsonl"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// # Reading a log from outside loopd
//
// memoryd reads loopd's logs (to index them and to file them to fleet
// memory) with one reader, so both readers open, decode and label a log
// the same way: strictly, without following a symlink, and with trust
// starting from the epoch's head.

var logName = regexp.MustCompile(`^(0|[1-9][0-9]{0,8})\.jsonl$`)

// Files lists every session log under sessions/ (sessions/<id>/<epoch>.jsonl
// with a valid session id), in a fixed order. A missing sessions/ has none.
func Files(sessions string) ([]string, error) {
	dirs, err := os.ReadDir(sessions)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range dirs {
		if !d.IsDir() || wire.CheckSessionID(d.Name()) != nil {
			continue
		}
		files, err := os.ReadDir(filepath.Join(sessions, d.Name()))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if f.Type().IsRegular() && logName.MatchString(f.Name()) {
				out = append(out, filepath.Join(sessions, d.Name(), f.Name()))
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// Name is the session id and epoch a log's path names
// (sessions/<id>/<epoch>.jsonl), or an error if it names none.
func Name(path string) (session string, epoch int64, err error) {
	session = filepath.Base(filepath.Dir(path))
	if err := wire.CheckSessionID(session); err != nil {
		return "", 0, err
	}
	m := logName.FindStringSubmatch(filepath.Base(path))
	if m == nil {
		return "", 0, fmt.Errorf("read session log: %s is not a session log (sessions/<id>/<epoch>.jsonl)", path)
	}
	epoch, _ = strconv.ParseInt(m[1], 10, 64)
	return session, epoch, nil
}

// Scan reads the log at path ([Name] must accept it) in order and calls
// fn with each record, its line (from 1) and the session's trust after
// it: from the epoch's [Head], raised by every tool result. A missing
// log has no records; a record that does not decode, or a tool result
// without a class, is an error naming the line.
func Scan(path string, fn func(line int, r Record, t Trust) error) error {
	if _, _, err := Name(path); err != nil {
		return err
	}
	f, err := openLog(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	trust := Trust{Taint: dataclass.Floor}
	err = jsonl.ScanReader(f, path, jsonl.DefaultMaxLine, func(n int, b []byte) error {
		v, err := Records.Decode(b)
		if err != nil {
			return fmt.Errorf("%s:%d: %v", path, n, err)
		}
		switch r := v.(type) {
		case *Head:
			// An epoch after 0 starts from the trust of every epoch
			// before it, never from the floor: a compacted session that
			// read untrusted content stays memory-tainted.
			trust = trust.join(dataclass.Label{Class: r.Taint, Untrusted: r.Untrusted})
		case *ToolResult:
			if !r.Class.Valid() {
				return fmt.Errorf("%s:%d: tool result without a class", path, n)
			}
			trust = trust.join(r.Label)
		}
		return fn(n, v, trust)
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// openLog opens a session log for reading without following a symlink,
// neither the log itself (O_NOFOLLOW) nor its session directory, and
// only if it is a regular file: sessions/ is loopd's, and a reader must
// not be led to read (and index, recall or send on) a file outside it.
func openLog(path string) (*os.File, error) {
	dir, err := os.Lstat(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	if !dir.IsDir() {
		return nil, fmt.Errorf("read session log: %s is not a directory (a symlink?); session logs are read only from real directories", filepath.Dir(path))
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("read session log: %s is not a regular file; session logs are read only from regular files", path)
	}
	return f, nil
}
