// Package audit is brokerd's hash-chained audit log, and the one verifier
// that brokerd and `bxctl audit verify` share.
//
// # Files
//
// The log is every file in one directory whose name [IsLogName] accepts
// (YYYY-MM-DD.jsonl, a real UTC date), read in name order as one sequence
// of lines; other names are ignored. Each line is one [Record], a tagged
// union on "type": decision, approval, result, recovery, accepted_break,
// allowance, allowance_end (allowance.go).
// Lines are written only through package jsonl, by a [Writer].
//
// # What is hashed
//
// A record's hash is SHA-256 over the exact bytes of its line as stored,
// without the newline. Those bytes are the record's canonical encoding:
// {"type":"<tag>","seq":N,"time":"...","prev":"...",<the other fields in
// declaration order>}, compact, no HTML escaping. [ParseLine] refuses a
// line that is not byte for byte the encoding of the record it decodes to,
// so each record has exactly one line and one hash.
//
// Line k of the log (counted from 1 across every file) must carry seq k,
// and prev = the lowercase hex hash of line k-1, whatever that line is (a
// damaged line too); line 1 carries [Genesis]. The verifier counts seq from
// lines and never takes it from a line.
//
// # Damage, breaks and what may follow them
//
// A torn last line (cut before its newline) or an unparseable last line is
// damage, not tampering: the next [Open] appends a [Recovery] naming it by
// file, line, hash and size, after ending a torn line with the newline it
// lacks. A line followed by a recovery that describes it is recovered,
// whether or not it parses, and is otherwise left out of the check (its
// position still counts). Any other failure is a break: [Open] refuses it,
// naming file:line. The owner may accept it ([AcceptBreak], brokerd
// --accept-break), which appends an [AcceptedBreak] naming the break's
// file, line and last_good hash; everything from the break to that record
// goes unchecked, and the check resumes after it.
//
// An ordinary [Open] checks the latest two files, chained from the line
// before them; [Verify] and [AcceptBreak] check the whole log. A check of
// part of the log takes on trust what it cannot see (a reference to an
// older decision, an accepted_break naming an older file), so it never
// refuses a log the whole check accepts. The writer takes nothing on
// trust: it refuses to append a record naming a decision it has not read.
//
// # Where the log ends
//
// A chain cannot see its own end cut off, a well-chained line added, or
// every line re-chained after an edit. The writer therefore records the
// head it wrote in [HeadPath] (STATE/broker/audit.head, beside the
// directory),
// twice per append (the line under way, then the line written), and
// [Open] and [AcceptBreak] refuse a log that does not end there
// ([HeadError]); [AdoptHead] is the owner's deliberate way past that. The
// owner's [Anchor]s, kept where brokerd cannot write, are checked by
// [VerifyEnd] with the head, and outlive a writer that rewrote both.
// Package consultlog's log keeps a head record of its own by the same
// exported code ([WriteHead], [ReadHead], [StartHead], [CheckHead],
// [ReplaceHead], [CheckAnchors]), which takes the log's words and runbook
// entries as a [HeadLog].
//
// # Invariants
//
//   - a decision is on disk before anything it allows runs ([Writer.Append]
//     returns only after the line is fsynced);
//   - the head record names the last line written, or the one line an
//     append under way may have written, and nothing else;
//   - results are recorded by hash and size, never content;
//   - nothing is repaired or deleted: a torn or unparseable last line is
//     followed by a [Recovery] describing it, and a break the owner accepts
//     is followed by an [AcceptedBreak]; both only ever append;
//   - [Verify] and [VerifyEnd] are pure functions of the files; [Open]
//     and [AcceptBreak] are the log's only writers and never append a
//     line Verify would refuse; [AdoptHead] writes only the head record.
package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"wntrmute.dev/boxmaker/pkg/logs/jsonl"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// Genesis is the prev of the first record of a log: 64 zeros.
const Genesis = "0000000000000000000000000000000000000000000000000000000000000000"

// MaxLine caps one line. The writer refuses a longer record and the
// verifier reads a longer line as damage.
const MaxLine = jsonl.DefaultMaxLine

// TimeLayout is the only form of a record's time: RFC 3339, UTC, with
// nanoseconds always written, so that times sort as strings.
const TimeLayout = "2006-01-02T15:04:05.000000000Z"

// IsLogName reports whether name is an audit log file: YYYY-MM-DD.jsonl
// naming a real date (2026-02-30.jsonl is not one). Writer and verifier
// both use it, so they cannot disagree about which files are the log.
func IsLogName(name string) bool {
	date, ok := bytes.CutSuffix([]byte(name), []byte(".jsonl"))
	if !ok || len(date) != len("2006-01-02") {
		return false
	}
	for i, c := range date {
		if i == 4 || i == 7 {
			if c != '-' {
				return false
			}
		} else if c < '0' || c > '9' {
			return false
		}
	}
	t, err := time.Parse(time.DateOnly, string(date))
	return err == nil && t.Format(time.DateOnly) == string(date)
}

// logName is the file a record written at t belongs in, by its UTC date.
func logName(t time.Time) string { return t.UTC().Format(time.DateOnly) + ".jsonl" }

// Header is what every record carries.
type Header struct {
	Seq  int64  // position of the record in the whole log, from 1
	Time string // when it was written, in [TimeLayout]
	Prev string // hex SHA-256 of the previous line, or [Genesis]
}

// Record is one line of the audit log. Only this package's types are
// records: the interface has unexported methods.
type Record interface {
	strict.Variant
	// Head returns the record's seq, time and prev.
	Head() Header
	setHead(Header)
	validate() error
}

var records = strict.NewUnion[Record]("type",
	func() Record { return new(Decision) },
	func() Record { return new(Approval) },
	func() Record { return new(Result) },
	func() Record { return new(Recovery) },
	func() Record { return new(AcceptedBreak) },
	func() Record { return new(Allowance) },
	func() Record { return new(AllowanceEnd) },
)

// Tags lists the record types, for tests that want a golden file each.
func Tags() []string { return records.Tags() }

// Decision is written before a tool call runs, and for every denial.
type Decision struct {
	Seq    int64          `json:"seq"`
	Time   string         `json:"time"`
	Prev   string         `json:"prev"`
	Record DecisionRecord `json:"record"`
}

// Approval answers the ask decision whose seq is Decision (its approval id),
// with the re-decision made against the grants and taint of that moment.
type Approval struct {
	Seq      int64  `json:"seq"`
	Time     string `json:"time"`
	Prev     string `json:"prev"`
	Decision int64  `json:"decision"`
	Answer   Answer `json:"answer"`
	// Approver names who answered, when known: "mattermost:<user id>"
	// for an answer from the chat, "admin.sock:uid <n>" for bxctl.
	Approver string `json:"approver,omitempty"`
	// The re-decision (for a refusal or expiry: denied, with that reason)
	// and the session's state when it was made.
	Verdict
}

// Result records what an allowed call produced, by hash and size only.
type Result struct {
	Seq       int64           `json:"seq"`
	Time      string          `json:"time"`
	Prev      string          `json:"prev"`
	Decision  int64           `json:"decision"` // seq of the allowed decision
	SHA256    string          `json:"sha256"`   // hex SHA-256 of the output
	Size      int64           `json:"size"`     // bytes of output
	Exit      int             `json:"exit"`     // the tool's exit status
	Class     dataclass.Class `json:"class"`    // data class of the result
	Untrusted bool            `json:"untrusted"`
	// MCPPin is, for an MCP tool's call, the listing_sha256 of the pin
	// the server's live listing was checked against (absent otherwise).
	MCPPin string `json:"mcp_pin,omitempty"`
}

// Recovery describes one damaged line, the line just before it, and what
// the writer did about it. The damaged line stays where it is.
type Recovery struct {
	Seq    int64  `json:"seq"`
	Time   string `json:"time"`
	Prev   string `json:"prev"`
	File   string `json:"file"`   // the damaged line's file
	Line   int    `json:"line"`   // its 1-based line number in File
	Damage Damage `json:"damage"` // torn or unparseable
	Action Action `json:"action"` // ended_line or none
	SHA256 string `json:"sha256"` // hex SHA-256 of its bytes, newline excluded
	Size   int64  `json:"size"`   // its length, newline excluded
}

// AcceptedBreak records that the owner accepted the break at File:Line
// (brokerd --accept-break). LastGood is the hash of the line just before
// the break; the verifier resumes after this record.
type AcceptedBreak struct {
	Seq      int64  `json:"seq"`
	Time     string `json:"time"`
	Prev     string `json:"prev"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	LastGood string `json:"last_good"`
}

// Tag implements strict.Variant.
func (*Decision) Tag() string      { return "decision" }
func (*Approval) Tag() string      { return "approval" }
func (*Result) Tag() string        { return "result" }
func (*Recovery) Tag() string      { return "recovery" }
func (*AcceptedBreak) Tag() string { return "accepted_break" }

// Head implements Record.
func (r *Decision) Head() Header      { return Header{r.Seq, r.Time, r.Prev} }
func (r *Approval) Head() Header      { return Header{r.Seq, r.Time, r.Prev} }
func (r *Result) Head() Header        { return Header{r.Seq, r.Time, r.Prev} }
func (r *Recovery) Head() Header      { return Header{r.Seq, r.Time, r.Prev} }
func (r *AcceptedBreak) Head() Header { return Header{r.Seq, r.Time, r.Prev} }

func (r *Decision) setHead(h Header)      { r.Seq, r.Time, r.Prev = h.Seq, h.Time, h.Prev }
func (r *Approval) setHead(h Header)      { r.Seq, r.Time, r.Prev = h.Seq, h.Time, h.Prev }
func (r *Result) setHead(h Header)        { r.Seq, r.Time, r.Prev = h.Seq, h.Time, h.Prev }
func (r *Recovery) setHead(h Header)      { r.Seq, r.Time, r.Prev = h.Seq, h.Time, h.Prev }
func (r *AcceptedBreak) setHead(h Header) { r.Seq, r.Time, r.Prev = h.Seq, h.Time, h.Prev }

// ParseLine decodes one line of the log (without its newline): strictly,
// with every field's form checked, and only if the line is byte for byte
// the canonical encoding of the record it decodes to.
func ParseLine(line []byte) (Record, error) {
	return ParseCanonical(records, line, MaxLine, func(r Record) error {
		if err := CheckHeader(r.Head()); err != nil {
			return err
		}
		return r.validate()
	})
}

// encode is the one way a record becomes a line: the union's encoding,
// passed through the same encoder jsonl uses, so the bytes hashed are the
// bytes written.
func encode(r Record) ([]byte, error) {
	b, err := records.Encode(r)
	if err != nil {
		return nil, err
	}
	line, err := strict.Marshal(json.RawMessage(b))
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(line, b) {
		return nil, fmt.Errorf("encode %s record: jsonl would write other bytes", r.Tag())
	}
	return line, nil
}

func checkTime(s string) error {
	t, err := time.Parse(TimeLayout, s)
	if err != nil || t.Format(TimeLayout) != s {
		return fmt.Errorf("time %q is not RFC 3339 UTC in the form %s", s, TimeLayout)
	}
	return nil
}
