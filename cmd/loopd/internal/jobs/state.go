package jobs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// MaxState caps loopd's record of runs: wire.MaxJobs runs and
// wire.MaxJobReports reports, each at most maxRecord encoded, is 1.5 MiB.
const MaxState = 4 << 20

// MaxRunText caps a run's answer or reason as kept in the record.
const MaxRunText = 12 << 10

// stateFile is loop/jobs.json: per job, the time from which its slots
// count (a slot after From and at or before now is due), how many runs
// it has had and the last of them. Only loopd writes it.
type stateFile struct {
	Jobs []jobState `json:"jobs"`
	// Seq numbers the reports; Reports are the last wire.MaxJobReports
	// runs whose deliver is Mattermost, for gatewayd to post once each.
	Seq     int64            `json:"seq"`
	Reports []wire.JobReport `json:"reports"`
}

type jobState struct {
	Name string       `json:"name"`
	From string       `json:"from"`
	Runs int64        `json:"runs"`
	Last *wire.JobRun `json:"last,omitempty"`
}

func (st *stateFile) job(name string) *jobState {
	for i := range st.Jobs {
		if st.Jobs[i].Name == name {
			return &st.Jobs[i]
		}
	}
	return nil
}

func (js *jobState) from() time.Time {
	t, _ := time.Parse(time.RFC3339, js.From) // checked by readState
	return t
}

func fileName(path string) string { return strings.TrimSuffix(filepath.Base(path), ".toml") }

// readState reads the record strictly; a missing file is an empty one.
func readState(path string) (*stateFile, error) {
	st := &stateFile{Jobs: []jobState{}, Reports: []wire.JobReport{}}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read job record: %v; see docs/runbook.md#job-record-damaged", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > MaxState {
		return nil, fmt.Errorf("read job record %s: not a regular file of at most %d bytes; see docs/runbook.md#job-record-damaged", path, MaxState)
	}
	data := make([]byte, fi.Size())
	if _, err := f.ReadAt(data, 0); err != nil && fi.Size() > 0 {
		return nil, fmt.Errorf("read job record %s: %v; see docs/runbook.md#job-record-damaged", path, err)
	}
	if err := strict.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("read job record %s: %v; see docs/runbook.md#job-record-damaged", path, err)
	}
	seen := map[string]bool{}
	for _, js := range st.Jobs {
		if _, err := time.Parse(time.RFC3339, js.From); err != nil || !NamePattern.MatchString(js.Name) || seen[js.Name] || js.Runs < 0 {
			return nil, fmt.Errorf("read job record %s: job %q has a bad name, time or count, or appears twice; see docs/runbook.md#job-record-damaged", path, js.Name)
		}
		seen[js.Name] = true
	}
	if st.Jobs == nil {
		st.Jobs = []jobState{}
	}
	if st.Reports == nil {
		st.Reports = []wire.JobReport{}
	}
	return st, nil
}

// writeState replaces the record atomically: a temporary file, fsynced,
// renamed over it, and the directory fsynced, so a crash leaves the old
// record or the new one.
func writeState(path string, st *stateFile) ([]byte, error) {
	data, err := strict.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("write job record: %w", err)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("write job record: %w", err)
	}
	_, werr := f.Write(data)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return nil, fmt.Errorf("write job record: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("write job record: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return data, nil
}
