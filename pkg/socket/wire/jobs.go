package wire

import "fmt"

// # The owner's jobs, on loop.sock
//
// bxctl sends [ListJobs]; loopd answers [JobList]: every job file it
// read at that moment, valid ones with their next and last runs, invalid
// ones with the refusal. The same [JobRun] is what loopd keeps of each
// job's last run in its own state (loop/jobs.json).

// JobSessionPrefix starts every job run's session id
// ("job-<name>-<n>"). loop.sock refuses a user message for such a
// session: a run's log has one writer, the scheduler.
const JobSessionPrefix = "job-"

// ListJobs asks loopd for its jobs. bxctl to loopd.
type ListJobs struct{}

// Tag implements strict.Variant.
func (*ListJobs) Tag() string { return "list_jobs" }

// JobOutcome is how a run ended. The list is append-only.
type JobOutcome string

// The outcomes.
const (
	JobRunning     JobOutcome = "running"     // the run is under way
	JobAnswered    JobOutcome = "answered"    // the model answered
	JobStopped     JobOutcome = "stopped"     // runaway control or a full context stopped it (Reason)
	JobFailed      JobOutcome = "failed"      // the run could not be carried on (Reason)
	JobInterrupted JobOutcome = "interrupted" // loopd stopped during the run
)

// Caps on what one [JobRun] carries in a [JobList], so that the list of
// every job ([MaxJobs]) fits one loop.sock frame.
const (
	MaxJobs         = 32  // job files loopd reads, valid or refused
	MaxJobListText  = 240 // bytes of a run's answer or reason
	MaxJobListCall  = 320 // bytes of one refused call (its runbook pointer is at the end)
	MaxJobListCalls = 3   // calls refused, listed per run
)

// JobRun is one run of a job: its session (job-<name>-<n>), when it
// started and ended (RFC 3339, UTC), how it ended, and every tool call
// brokerd refused in it, with the reason brokerd gave.
type JobRun struct {
	Run     int64      `json:"run"`
	Session string     `json:"session"`
	Started string     `json:"started"`
	Ended   string     `json:"ended,omitempty"`
	Outcome JobOutcome `json:"outcome"`
	Reason  string     `json:"reason,omitempty"`
	Text    string     `json:"text,omitempty"`
	Denied  []string   `json:"denied,omitempty"`
	// Catchup: the run stands for one or more times missed while loopd
	// was down (they run once, not once each).
	Catchup bool `json:"catchup,omitempty"`
	// SHA256 is the job file's hash when the run started, so an edit
	// shows against the run it first applied to.
	SHA256 string `json:"sha256"`
}

// JobInfo is one valid job file.
type JobInfo struct {
	Name     string  `json:"name"`
	Schedule string  `json:"schedule"`
	Deliver  string  `json:"deliver"`
	Next     string  `json:"next,omitempty"` // RFC 3339; "" when it will not run again
	Runs     int64   `json:"runs"`
	Last     *JobRun `json:"last,omitempty"`
}

// JobRefusal is a job file loopd did not take; Error ends with its
// runbook pointer.
type JobRefusal struct {
	File  string `json:"file"`
	Error string `json:"error"`
}

// JobList answers ListJobs.
type JobList struct {
	Jobs    []JobInfo    `json:"jobs"`
	Refused []JobRefusal `json:"refused"`
}

// Tag implements strict.Variant.
func (*JobList) Tag() string { return "job_list" }

var jobOutcomes = []JobOutcome{JobRunning, JobAnswered, JobStopped, JobFailed, JobInterrupted}

// UnmarshalText refuses an outcome this version does not know.
func (o *JobOutcome) UnmarshalText(b []byte) error {
	for _, k := range jobOutcomes {
		if string(b) == string(k) {
			*o = k
			return nil
		}
	}
	return fmt.Errorf("unknown job outcome %q", b)
}

// JobReportsSince asks loopd for the reports of finished runs whose
// deliver is a Mattermost channel or direct message, after sequence
// number After, oldest first: gatewayd posts each one once. loopd keeps
// the last [MaxJobReports] of them. loopd answers [JobReports].
type JobReportsSince struct {
	After int64 `json:"after"`
}

// Tag implements strict.Variant.
func (*JobReportsSince) Tag() string { return "job_reports_since" }

// Caps on the reports loopd keeps and sends in one [JobReports].
const (
	MaxJobReports      = 32
	MaxJobReportsBytes = 48 << 10 // text of one JobReports; a client asks again after the last Seq
)

// JobReport is one finished run, to post where its job file says.
type JobReport struct {
	Seq     int64      `json:"seq"`
	Job     string     `json:"job"`
	Run     int64      `json:"run"`
	Session string     `json:"session"`
	Deliver string     `json:"deliver"` // "channel:<id>" or "dm:<user id>"
	Outcome JobOutcome `json:"outcome"`
	Text    string     `json:"text"`
	Reason  string     `json:"reason,omitempty"`
	Denied  []string   `json:"denied,omitempty"`
}

// JobReports answers JobReportsSince. More says the byte cap left later
// reports out.
type JobReports struct {
	Items []JobReport `json:"items"`
	More  bool        `json:"more"`
}

// Tag implements strict.Variant.
func (*JobReports) Tag() string { return "job_reports" }
