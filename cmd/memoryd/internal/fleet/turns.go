package fleet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"

	"wntrmute.dev/boxmaker/pkg/dataclass"
	"wntrmute.dev/boxmaker/pkg/jsonl"
	"wntrmute.dev/boxmaker/pkg/sessionlog"
	"wntrmute.dev/boxmaker/pkg/wire"
)

// Turn is what fleet memory takes from one ended turn of a session log:
// the speaker's messages and the agent's final reply, and the labels
// loopd logged (the session's class and trust at the turn's end). Tool
// calls, tool results and reasoning are never read into it.
type Turn struct {
	Session string
	Epoch   int64
	Turn    int64
	Labels  State
	Said    []Line // the speaker's messages, in order
	Reply   *Line  // the final reply; nil if the turn ended without one
}

// Line is one message's text and the log record it is on (from 1).
type Line struct {
	Record int
	Text   string
}

var epochName = regexp.MustCompile(`^(0|[1-9][0-9]{0,8})\.jsonl$`)

// ReadTurns reads a session log's ended turns. A record it does not know
// is an error (package sessionlog decodes strictly), as for the index.
func ReadTurns(path string) ([]Turn, error) {
	session := filepath.Base(filepath.Dir(path))
	if err := wire.CheckSessionID(session); err != nil {
		return nil, err
	}
	m := epochName.FindStringSubmatch(filepath.Base(path))
	if m == nil {
		return nil, fmt.Errorf("read turns: %s is not a session log", path)
	}
	epoch, _ := strconv.ParseInt(m[1], 10, 64)
	f, err := openLog(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	labels := State{Taint: dataclass.Floor}
	open := map[int64]*Turn{}
	get := func(n int64) *Turn {
		if open[n] == nil {
			open[n] = &Turn{Session: session, Epoch: epoch, Turn: n}
		}
		return open[n]
	}
	var out []Turn
	err = jsonl.ScanReader(f, path, jsonl.DefaultMaxLine, func(n int, b []byte) error {
		v, err := sessionlog.Records.Decode(b)
		if err != nil {
			return fmt.Errorf("%s:%d: %v", path, n, err)
		}
		switch r := v.(type) {
		case *sessionlog.User:
			t := get(r.Turn)
			t.Said = append(t.Said, Line{n, r.Text})
		case *sessionlog.Assistant:
			// Only a reply that calls no tool can be the final one;
			// the content beside a tool call is the agent thinking
			// aloud before it acts. Reasoning is never read.
			t := get(r.Turn)
			if len(r.Message.ToolCalls) == 0 && r.Message.Content != "" {
				t.Reply = &Line{n, r.Message.Content}
			} else {
				t.Reply = nil
			}
		case *sessionlog.ToolResult:
			if !r.Class.Valid() {
				return fmt.Errorf("%s:%d: tool result without a class", path, n)
			}
			labels.Taint = dataclass.Join(labels.Taint, r.Class)
			labels.Untrusted = labels.Untrusted || r.Untrusted
		case *sessionlog.TurnEnd:
			t := get(r.Turn)
			t.Labels = labels
			out = append(out, *t)
			delete(open, r.Turn)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// openLog opens a log without following a symlink, only if it is a
// regular file in a real directory (as package recall does).
func openLog(path string) (*os.File, error) {
	dir, err := os.Lstat(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	if !dir.IsDir() {
		return nil, fmt.Errorf("read turns: %s is not a directory", filepath.Dir(path))
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("read turns: %s is not a regular file", path)
	}
	return f, nil
}
