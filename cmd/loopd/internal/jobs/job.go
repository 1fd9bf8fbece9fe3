package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"wntrmute.dev/boxmaker/pkg/host/config"
	"wntrmute.dev/boxmaker/pkg/host/ownership"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/loopd/schedule"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// Caps on what the owner's job directory may hold.
const (
	MaxFiles  = wire.MaxJobs // job files read; more are refused, as one
	MaxFile   = 32 << 10     // bytes of one job file
	MaxPrompt = 16 << 10     // bytes of one prompt (under wire.MaxMessage)
)

// NamePattern is what a job's name may be; the file is <name>.toml.
var NamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// mmID is a Mattermost id: 26 lowercase letters and digits.
var mmID = regexp.MustCompile(`^[a-z0-9]{26}$`)

// Deliver is where a run's report goes: only the log, a Mattermost
// channel, or a direct message to a Mattermost user.
type Deliver struct {
	Kind string // "log", "channel" or "dm"
	ID   string // the channel's or user's id; "" for the log
}

// String is the deliver key as written.
func (d Deliver) String() string {
	if d.Kind == "log" {
		return "log"
	}
	return d.Kind + ":" + d.ID
}

// ParseDeliver parses "log", "channel:<id>" or "dm:<user id>".
func ParseDeliver(s string) (Deliver, error) {
	if s == "log" {
		return Deliver{Kind: "log"}, nil
	}
	kind, id, _ := strings.Cut(s, ":")
	if (kind == "channel" || kind == "dm") && mmID.MatchString(id) {
		return Deliver{Kind: kind, ID: id}, nil
	}
	return Deliver{}, fmt.Errorf("deliver %q: want \"log\", \"channel:<channel id>\" or \"dm:<user id>\" (a Mattermost id is 26 lowercase letters and digits)", s)
}

// Caps tighten loopd's own per-turn limits for one job; a zero field
// keeps loopd's. A cap above loopd's is refused: a job file cannot give
// a run more than a conversation gets.
type Caps struct {
	MaxCalls      int `toml:"max_calls"`
	ToolResultCap int `toml:"tool_result_cap"`
}

// file is a job file as the owner writes it (deploy/jobs/example.toml).
type file struct {
	Name    string `toml:"name"`
	Cron    string `toml:"cron"`
	Every   string `toml:"every"`
	At      string `toml:"at"`
	Prompt  string `toml:"prompt"`
	Deliver string `toml:"deliver"`
	Caps    Caps   `toml:"caps"`
}

// Job is one valid job file.
type Job struct {
	Name     string
	File     string // its path
	Schedule schedule.Schedule
	Prompt   string
	Deliver  Deliver
	Caps     Caps
	SHA256   string // of the file's bytes: an edit shows as a new hash
	// Build, for a built-in job, makes the run's prompt when the run
	// starts (Prompt is then unused); an error fails the run.
	Build func(ctx context.Context, session string) (string, error)
}

// Refused is a job file that was not taken, and why (the error ends with
// its runbook pointer).
type Refused struct {
	File string
	Err  error
}

// Limits are loopd's own caps, which a job may only tighten.
type Limits struct {
	MaxCalls, ToolResultCap int
}

// Parse decodes one job file's bytes, named path. It is the parser of
// the owner's input; [Load] adds the ownership check.
func Parse(path string, data []byte, lim Limits) (Job, error) {
	var f file
	if err := config.Decode(data, path, &f); err != nil {
		return Job{}, err
	}
	stem := strings.TrimSuffix(filepath.Base(path), ".toml")
	switch {
	case !NamePattern.MatchString(f.Name):
		return Job{}, fmt.Errorf("job %s: name %q must be 1 to 32 lowercase letters, digits or '-', starting with a letter or digit", path, f.Name)
	case f.Name != stem:
		return Job{}, fmt.Errorf("job %s: name %q must match the file's name (%s.toml), so one job has one file", path, f.Name, f.Name)
	case strings.TrimSpace(f.Prompt) == "":
		return Job{}, fmt.Errorf("job %s: prompt is required", path)
	case len(f.Prompt) > MaxPrompt:
		return Job{}, fmt.Errorf("job %s: prompt is %d bytes, over %d", path, len(f.Prompt), MaxPrompt)
	case f.Caps.MaxCalls < 0 || f.Caps.ToolResultCap < 0:
		return Job{}, fmt.Errorf("job %s: caps must not be negative", path)
	case lim.MaxCalls > 0 && f.Caps.MaxCalls > lim.MaxCalls:
		return Job{}, fmt.Errorf("job %s: caps.max_calls %d is over loopd's own %d; a job may only tighten it", path, f.Caps.MaxCalls, lim.MaxCalls)
	case lim.ToolResultCap > 0 && f.Caps.ToolResultCap > lim.ToolResultCap:
		return Job{}, fmt.Errorf("job %s: caps.tool_result_cap %d is over loopd's own %d; a job may only tighten it", path, f.Caps.ToolResultCap, lim.ToolResultCap)
	}
	var set []string
	for k, v := range map[string]string{"cron": f.Cron, "every": f.Every, "at": f.At} {
		if v != "" {
			set = append(set, k)
		}
	}
	if len(set) != 1 {
		slices.Sort(set)
		return Job{}, fmt.Errorf("job %s: give exactly one of cron, every or at (got %d: %s)", path, len(set), strings.Join(set, ", "))
	}
	var s schedule.Schedule
	var err error
	switch set[0] {
	case "cron":
		s, err = schedule.ParseCron(f.Cron)
	case "every":
		s, err = schedule.ParseEvery(f.Every)
	default:
		s, err = schedule.ParseAt(f.At)
	}
	if err != nil {
		return Job{}, fmt.Errorf("job %s: %v", path, err)
	}
	if f.Deliver == "" {
		return Job{}, fmt.Errorf("job %s: deliver is required (\"log\", \"channel:<id>\" or \"dm:<user id>\")", path)
	}
	d, err := ParseDeliver(f.Deliver)
	if err != nil {
		return Job{}, fmt.Errorf("job %s: %v", path, err)
	}
	sum := sha256.Sum256(data)
	return Job{Name: f.Name, File: path, Schedule: s, Prompt: f.Prompt, Deliver: d, Caps: f.Caps, SHA256: hex.EncodeToString(sum[:])}, nil
}

// Load reads every *.toml in dir. Each file must pass the owner-file
// rule for owners and parse; one that does not is refused alone, and
// the others are still taken. A missing directory holds no jobs.
func Load(dir string, owners ownership.Owners, lim Limits) ([]Job, []Refused) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []Refused{{File: dir, Err: fmt.Errorf("read jobs %s: %v; see docs/runbook.md#job-invalid", dir, err)}}
	}
	var jobs []Job
	var refused []Refused
	n := 0
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".toml") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if n++; n > MaxFiles {
			refused = append(refused, Refused{File: dir, Err: fmt.Errorf("read jobs %s: more than %d job files; %s and the files after it (by name) are not read; see docs/runbook.md#job-invalid", dir, MaxFiles, e.Name())})
			break
		}
		data, err := owners.ReadFile(path, MaxFile)
		if err != nil {
			var ue *ownership.UnsafeError
			if errors.As(err, &ue) {
				err = fmt.Errorf("job %s: %s: only root and the owner may write a job file or a directory above it; see docs/runbook.md#owner-file-unsafe", path, ue.Explain())
			} else {
				err = fmt.Errorf("job %s: %v; see docs/runbook.md#job-invalid", path, err)
			}
			refused = append(refused, Refused{File: path, Err: err})
			continue
		}
		j, err := Parse(path, data, lim)
		if err == nil && j.Name == TieringName {
			err = fmt.Errorf("job %s: the name %q is the built-in tiering job's (set [jobs] tiering in loopd.toml instead)", path, TieringName)
		}
		if err != nil {
			refused = append(refused, Refused{File: path, Err: fmt.Errorf("%v; see docs/runbook.md#job-invalid", err)})
			continue
		}
		jobs = append(jobs, j)
	}
	return jobs, refused
}

// SessionID is the session of run n of job name: a new one each run, so
// brokerd holds nothing (taint, trust, pending calls) from an earlier
// run, and the id names the job wherever the session is shown (an
// approval, bxctl approvals, the audit log).
func SessionID(name string, n int64) string {
	id := fmt.Sprintf("%s%s-%d", wire.JobSessionPrefix, name, n)
	if wire.CheckSessionID(id) != nil {
		panic("jobs: session id " + id + " is not a session id") // NamePattern keeps it one
	}
	return id
}
