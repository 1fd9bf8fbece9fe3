// Package migrate is `bxctl migrate`: it moves a state directory from an
// older format (package layout's format file) to this build's, one step
// at a time.
//
// Invariants: no step runs before a backup of the whole state directory
// is taken and checked against its manifest; the format file is written
// after each step, so it always names what the files are; a newer
// format is never touched; a failed step stops the migration and names
// the backup to go back to.
package migrate

import (
	"fmt"
	"path/filepath"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// Step moves a state directory from format From to From+1.
type Step struct {
	From  int
	What  string
	Apply func(state string) error
}

// Steps are this build's steps, oldest first. Format 0 (made before the
// format was recorded) holds format 1's files: its step only records it.
var Steps = []Step{
	{From: 0, What: "record the format (a state directory made before formats were recorded holds format 1's files)", Apply: func(string) error { return nil }},
}

// Backup takes a backup of state into dest and checks it.
type Backup func(state, dest string) error

// Result is what a migration did.
type Result struct {
	From, To int
	Backup   string // where the backup was taken; "" when nothing was to do
	Done     []string
}

// BackupPath is where a migration from format from keeps its backup by
// default: beside the state directory, named for the format and time.
func BackupPath(state string, from int, now time.Time) string {
	return fmt.Sprintf("%s.pre-format-%d-%s", filepath.Clean(state), from, now.UTC().Format("20060102T150405Z"))
}

// Run migrates state to format current with steps, after take made a
// backup at dest.
func Run(state string, steps []Step, current int, dest string, take Backup) (Result, error) {
	from, err := layout.ReadFormat(state)
	if err != nil {
		return Result{}, err
	}
	r := Result{From: from, To: from}
	switch {
	case from == current:
		return r, nil
	case from > current:
		return r, fmt.Errorf("migrate: state %s has format %d, newer than the %d this bxctl knows: nothing was changed; see docs/runbook.md#state-newer", state, from, current)
	}
	for n := from; n < current; n++ {
		if stepFrom(steps, n) == nil {
			return r, fmt.Errorf("migrate: this bxctl has no step from format %d: nothing was changed; migrate with the release that came after it first; see docs/runbook.md#state-older", n)
		}
	}
	if err := take(state, dest); err != nil {
		return r, fmt.Errorf("migrate: the backup before migrating failed, so nothing was changed: %v", err)
	}
	r.Backup = dest
	for n := from; n < current; n++ {
		s := stepFrom(steps, n)
		if err := s.Apply(state); err != nil {
			return r, fmt.Errorf("migrate: the step from format %d (%s) failed: %v; the state is at format %d; to go back, restore %s into an empty directory (bxctl restore); see docs/runbook.md#state-older", n, s.What, err, n, dest)
		}
		if err := layout.WriteFormat(state, n+1); err != nil {
			return r, fmt.Errorf("migrate: %v; to go back, restore %s; see docs/runbook.md#state-format", err, dest)
		}
		r.To = n + 1
		r.Done = append(r.Done, fmt.Sprintf("format %d to %d: %s", n, n+1, s.What))
	}
	return r, nil
}

func stepFrom(steps []Step, n int) *Step {
	for i := range steps {
		if steps[i].From == n {
			return &steps[i]
		}
	}
	return nil
}
