package ledger

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// Report is what [Rebuild] did.
type Report struct {
	// Written lists the sessions whose state file was written, sorted.
	Written []string
	// Unchanged lists the sessions whose file already held the log's state.
	Unchanged []string
	// Extra lists state files for sessions the log never names; they are
	// left as they are.
	Extra []string
	// Orphans lists the seq of each approval or result naming a decision
	// the log does not hold (lost in an accepted break): it could not be
	// given to a session. A later decision of that session carries the
	// taint it caused.
	Orphans []int64
	// Invalid lists session names in decision records that are not
	// session ids; no file can be written for them.
	Invalid []string
}

// Rebuild rewrites every session's state file from the audit log in
// auditDir, which must verify ([audit.Verify]); brokerd must not be
// running (Rebuild takes the ledger's lock). A session's state is the
// fold, in log order, of its records from [Fresh]:
//
//   - a decision, and an approval of one of its decisions, join the
//     Taint and Untrusted they carry (the state the call was decided
//     under, which live operation read from the file; an unreadable
//     state was recorded as secret and untrusted, with the reason
//     state_unreadable, which also sets Recalled, as reading it did);
//   - a result of one of its decisions joins its Class and Untrusted,
//     and sets Recalled if the decision's tool was recall or ask_memory
//     ([Recalls]).
//
// These are exactly the changes live operation makes, so the files equal
// the ones a ledger wrote (one exception: a file the ledger found
// unreadable, which it leaves as it was, is rewritten as secret and
// untrusted). Lines that do not parse (damage the log recovered) are
// skipped; records inside an accepted break are read as they are.
func Rebuild(auditDir, stateDir string) (Report, error) {
	if rep := audit.Verify(auditDir); !rep.OK() {
		return Report{}, fmt.Errorf("rebuild session state: audit log: %v", rep.Problem)
	}
	if err := prepareDir(stateDir); err != nil {
		return Report{}, fmt.Errorf("rebuild session state: %w", err)
	}
	fl, err := lockDir(stateDir)
	if err != nil {
		return Report{}, fmt.Errorf("rebuild session state: %w", err)
	}
	defer fl.Close()
	// The files will be the log's: a stale clean mark must not skip the
	// next start's own rebuild if this one fails half way.
	if err := os.Remove(filepath.Join(stateDir, cleanFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return Report{}, fmt.Errorf("rebuild session state: %v", err)
	}
	return rebuild(auditDir, stateDir)
}

// rebuild does the work of Rebuild with the lock held.
func rebuild(auditDir, stateDir string) (Report, error) {
	f, err := fold(auditDir)
	if err != nil {
		return Report{}, fmt.Errorf("rebuild session state: %v", err)
	}
	rep := Report{Orphans: f.orphans, Invalid: f.invalid}
	for _, id := range slices.Sorted(maps.Keys(f.states)) {
		next := f.states[id]
		cur, st, _ := readState(stateDir, id)
		if st == present && cur == next {
			rep.Unchanged = append(rep.Unchanged, id)
			continue
		}
		if err := writeState(stateDir, id, next); err != nil {
			return rep, fmt.Errorf("rebuild session state: %v", err)
		}
		rep.Written = append(rep.Written, id)
	}
	ids, err := stateFiles(stateDir)
	if err != nil {
		return rep, fmt.Errorf("rebuild session state: %v", err)
	}
	for _, id := range ids {
		if _, ok := f.states[id]; !ok {
			rep.Extra = append(rep.Extra, id)
		}
	}
	return rep, nil
}

// folded is the log read as session states.
type folded struct {
	states  map[string]policy.Session
	orphans []int64
	invalid []string
}

// fold reads every record of the log in order.
func fold(auditDir string) (*folded, error) {
	entries, err := os.ReadDir(auditDir)
	if err != nil {
		return nil, err
	}
	f := &folded{states: map[string]policy.Session{}}
	owner := map[int64]string{} // decision seq → session
	recalls := map[int64]bool{} // decision seq → a recall or ask_memory
	join := func(id string, c dataclass.Class, untrusted, recalled bool) {
		s, ok := f.states[id]
		if !ok {
			s = Fresh
		}
		f.states[id] = raise(s, c, untrusted, recalled)
	}
	apply := func(r audit.Record) {
		switch r := r.(type) {
		case *audit.Decision:
			id := r.Record.Session
			if wire.CheckSessionID(id) != nil {
				if !slices.Contains(f.invalid, id) {
					f.invalid = append(f.invalid, id)
				}
				return
			}
			owner[r.Seq] = id
			if Recalls(r.Record.Tool) {
				recalls[r.Seq] = true
			}
			// A decision over an unreadable state read it as the worst,
			// which holds recalled memory too.
			join(id, r.Record.Taint, r.Record.Untrusted, r.Record.Reason == audit.StateUnreadable)
		case *audit.Approval:
			if id, ok := owner[r.Decision]; ok {
				join(id, r.Taint, r.Untrusted, r.Reason == audit.StateUnreadable)
			} else {
				f.orphans = append(f.orphans, r.Seq)
			}
		case *audit.Result:
			if id, ok := owner[r.Decision]; ok {
				join(id, r.Class, r.Untrusted, recalls[r.Decision])
			} else {
				f.orphans = append(f.orphans, r.Seq)
			}
		}
	}
	for _, e := range entries { // sorted by name, as the log is read
		if !audit.IsLogName(e.Name()) {
			continue
		}
		if !e.Type().IsRegular() {
			return nil, fmt.Errorf("%s is not a regular file", e.Name())
		}
		if err := scanLog(filepath.Join(auditDir, e.Name()), apply); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// scanLog passes each complete line of a log file that parses to fn.
// Damaged lines (torn, over audit.MaxLine, unparseable) are skipped: the
// verifier has judged them, and they hold nothing to fold.
func scanLog(path string, fn func(audit.Record)) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	br := bufio.NewReaderSize(file, 64<<10)
	var line []byte
	long := false
	for {
		chunk, err := br.ReadSlice('\n')
		body, nl := bytes.CutSuffix(chunk, []byte("\n"))
		if !long {
			if len(line)+len(body) > audit.MaxLine {
				long, line = true, nil
			} else {
				line = append(line, body...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("read %s: %v", filepath.Base(path), err)
		}
		if nl && !long {
			if r, perr := audit.ParseLine(line); perr == nil {
				fn(r)
			}
		}
		if err == io.EOF {
			return nil
		}
		line, long = line[:0], false
	}
}
