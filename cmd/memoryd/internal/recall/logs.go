package recall

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

	"wntrmute.dev/boxmaker/pkg/dataclass"
	"wntrmute.dev/boxmaker/pkg/jsonl"
	"wntrmute.dev/boxmaker/pkg/sessionlog"
	"wntrmute.dev/boxmaker/pkg/wire"
)

// memoryd reads loopd's session logs (sessions/<id>/<epoch>.jsonl) with
// the record types loopd writes them with (pkg/sessionlog), strictly: a
// record type or field it does not know stops the indexing of that log
// loudly, rather than being skipped.

// Doc is one indexed item: a message of a session, or a note.
type Doc struct {
	Text    string
	Source  string          // identity, memory or memory-tainted
	Class   dataclass.Class // the session's taint at the turn's end, or the note's
	Session string          // "" for a note
	Epoch   int64
	Turn    int64
	Record  int    // line of the log, from 1
	Note    string // the note's id, "" for a session record
	// Where names a fleet memory hit's origin (its Honcho workspace,
	// session and peer); "" for a local one.
	Where string
	// Fleet is a fleet memory hit's message id (package fleet's
	// MessageID), to drop one the local index holds too.
	Fleet string
}

// Turn is one ended turn of a session log and the documents it yields.
type Turn struct {
	Session   string
	Epoch     int64
	Turn      int64
	Class     dataclass.Class
	Untrusted bool
	Docs      []Doc
}

var epochRE = regexp.MustCompile(`^(0|[1-9][0-9]{0,8})\.jsonl$`)

// LogFiles lists every session log under sessions/, in a fixed order.
func LogFiles(sessions string) ([]string, error) {
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
			if f.Type().IsRegular() && epochRE.MatchString(f.Name()) {
				out = append(out, filepath.Join(sessions, d.Name(), f.Name()))
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// ReadLog reads one session log and returns its ended turns, in the order
// they ended. A turn's class and trust are the session's as of the turn's
// end: the reply was made from the whole context so far, which in an
// epoch after 0 includes the summary of the epochs before it, so its
// head's taint and untrusted flag are where each starts. Tool results
// are not indexed (only the calls, by name and arguments).
func ReadLog(path string) ([]Turn, error) {
	session := filepath.Base(filepath.Dir(path))
	if err := wire.CheckSessionID(session); err != nil {
		return nil, err
	}
	m := epochRE.FindStringSubmatch(filepath.Base(path))
	if m == nil {
		return nil, fmt.Errorf("%s is not a session log", path)
	}
	epoch, _ := strconv.ParseInt(m[1], 10, 64)
	class, untrusted := dataclass.Floor, false
	open := map[int64][]Doc{}
	var out []Turn
	f, err := openLog(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	err = jsonl.ScanReader(f, path, jsonl.DefaultMaxLine, func(n int, b []byte) error {
		v, err := sessionlog.Records.Decode(b)
		if err != nil {
			return fmt.Errorf("%s:%d: %v", path, n, err)
		}
		doc := func(turn int64, text string) {
			if text != "" {
				open[turn] = append(open[turn], Doc{Text: text, Session: session, Epoch: epoch, Turn: turn, Record: n})
			}
		}
		switch r := v.(type) {
		case *sessionlog.User:
			doc(r.Turn, r.Text)
		case *sessionlog.Assistant:
			doc(r.Turn, r.Message.Content)
			for _, c := range r.Message.ToolCalls {
				doc(r.Turn, c.Function.Name+" "+c.Function.Arguments)
			}
		case *sessionlog.Head:
			// An epoch after 0 starts from the trust of every epoch
			// before it, never from the floor: a compacted session that
			// read untrusted content stays memory-tainted.
			class, untrusted = dataclass.Join(class, r.Taint), untrusted || r.Untrusted
		case *sessionlog.ToolResult:
			if !r.Class.Valid() {
				return fmt.Errorf("%s:%d: tool result without a class", path, n)
			}
			class, untrusted = dataclass.Join(class, r.Class), untrusted || r.Untrusted
		case *sessionlog.TurnEnd:
			t := Turn{Session: session, Epoch: epoch, Turn: r.Turn, Class: class, Untrusted: untrusted, Docs: open[r.Turn]}
			for i := range t.Docs {
				t.Docs[i].Class, t.Docs[i].Source = class, SourceOf(untrusted)
			}
			delete(open, r.Turn)
			out = append(out, t)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return out, err
}

// openLog opens a session log for reading without following a symlink,
// neither the log itself (O_NOFOLLOW) nor its session directory, and
// only if it is a regular file: sessions/ is loopd's, and memoryd must
// not be led to read (and index, and recall) a file outside it.
func openLog(path string) (*os.File, error) {
	dir, err := os.Lstat(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	if !dir.IsDir() {
		return nil, fmt.Errorf("%s is not a directory (a symlink?); session logs are read only from real directories", filepath.Dir(path))
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file; session logs are read only from regular files", path)
	}
	return f, nil
}

// SourceOf is the source tag of a session's experience.
func SourceOf(untrusted bool) string {
	if untrusted {
		return SourceTainted
	}
	return SourceMemory
}
