// Package consultlog is brokerd's outbound consult log: every payload the
// consult tool sends to a remote model, in full, and every answer that
// came back, in one append-only, hash-chained file (broker/consult/
// consult.jsonl, package layout's ConsultLog), so that nothing reaches a
// remote model that the owner cannot read afterwards (`bxctl consult
// log`) and no line can be changed unseen (`bxctl audit verify`).
//
// # Records
//
// Each line is one [Record], a tagged union on "type":
//
//   - request: written before the request leaves. It holds every byte of
//     the body, the URL, the model, the grant (id and hash), the session,
//     the time and the audit record that allowed the call, by its seq and
//     the SHA-256 of its line in the audit log ("decision_sha256").
//   - response: written when the call ends, naming its request by seq and
//     line hash: the HTTP status, the answer, the reasoning (kept apart),
//     the finish reason, the stream's size and SHA-256, and the error if
//     the call failed (a stall, the total bound, a refusal).
//
// # The chain
//
// The chain follows package audit's rules: line k carries seq k and prev =
// the lowercase hex SHA-256 of line k-1's bytes (line 1: [audit.Genesis]);
// a line must be byte for byte the canonical encoding of the record it
// decodes to, so each record has one line and one hash. The rules are
// package audit's own code ([audit.ParseCanonical], [audit.CheckHeader],
// [audit.LineHash]), not a copy of them. [Verify] checks
// the chain, every response's link to its request and, given the audit
// log, every request's link to its decision, and that every consult the
// audit log records a result for has its request and its response here
// (none unlogged, and no end cut off: brokerd writes the response before
// the audit result).
//
// # Where the log ends
//
// A chain cannot see its end cut off, the file deleted, a well-chained
// line added or every line re-chained after an edit, and a consult that
// failed before its container ran has no audit result to show its lines.
// So the writer keeps a head record beside the log's directory
// (broker/consult.head), by package audit's code and judgment (head.go);
// [Open] refuses a log that does not end there with an
// [*audit.HeadError], which refuses brokerd's start; [VerifyEnd] checks
// it and the owner's anchors of this log; [AdoptHead] is the owner's
// deliberate way past.
//
// # Invariants
//
//   - a request is on disk (fsynced) before [Writer.Append] returns, and
//     brokerd runs the consult only after that;
//   - the log is only ever appended to; [Open] refuses a log whose chain
//     does not hold or whose last line is torn (the owner's to look at:
//     docs/runbook.md#consult-log-damaged), and no consult runs then;
//   - the head record names the last line written, or the one line an
//     append under way may have written, and nothing else; after a
//     failed write the writer appends nothing more;
//   - [Verify] and [VerifyEnd] are pure functions of the files.
package consultlog

import (
	"fmt"

	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

// FileName is the log's file in its directory.
const FileName = "consult.jsonl"

// MaxLine caps one line: a body, or an answer with its reasoning, is
// well under it.
const MaxLine = 4 << 20

// Record is one line of the consult log.
type Record interface {
	strict.Variant
	head() *Header
}

// Header is what every record carries first.
type Header struct {
	Seq  int64  `json:"seq"`
	Time string `json:"time"` // audit.TimeLayout
	Prev string `json:"prev"`
}

// GrantRef names the grant that allowed a consult.
type GrantRef struct {
	ID     string `json:"id"`
	SHA256 string `json:"sha256"`
}

// Request is a payload about to leave, in full.
type Request struct {
	Header
	Session        string   `json:"session"`
	Decision       int64    `json:"decision"`        // the audit record that allowed it: a decision, or the approval of an ask
	DecisionSHA256 string   `json:"decision_sha256"` // that line's hash in the audit log
	Grant          GrantRef `json:"grant"`
	Model          string   `json:"model"`
	URL            string   `json:"url"`
	Body           string   `json:"body"` // every byte sent, as JSON text
}

// Response is what came back for a request.
type Response struct {
	Header
	Request       int64  `json:"request"`
	RequestSHA256 string `json:"request_sha256"`
	Status        int    `json:"status"`
	Content       string `json:"content"`
	Reasoning     string `json:"reasoning"`
	Finish        string `json:"finish"`
	Truncated     bool   `json:"truncated"`
	StreamBytes   int64  `json:"stream_bytes"`
	StreamSHA256  string `json:"stream_sha256"`
	Error         string `json:"error,omitempty"`
}

// Tag implements strict.Variant.
func (*Request) Tag() string  { return "request" }
func (*Response) Tag() string { return "response" }

func (r *Request) head() *Header  { return &r.Header }
func (r *Response) head() *Header { return &r.Header }

var records = strict.NewUnion[Record]("type",
	func() Record { return new(Request) },
	func() Record { return new(Response) },
)

// ParseLine decodes one line strictly, and only if it is byte for byte
// the canonical encoding of the record it decodes to (package audit's
// line rules, [audit.ParseCanonical]).
func ParseLine(line []byte) (Record, error) {
	return audit.ParseCanonical(records, line, MaxLine, func(r Record) error {
		h := r.head()
		if err := audit.CheckHeader(audit.Header{Seq: h.Seq, Time: h.Time, Prev: h.Prev}); err != nil {
			return err
		}
		return validate(r)
	})
}

func validate(r Record) error {
	switch r := r.(type) {
	case *Request:
		if r.Session == "" || r.Decision < 1 || !audit.IsHash(r.DecisionSHA256) || r.Grant.ID == "" || !audit.IsHash(r.Grant.SHA256) || r.Model == "" || r.URL == "" || r.Body == "" {
			return fmt.Errorf("request %d: a field is missing or malformed", r.Seq)
		}
	case *Response:
		if r.Request < 1 || r.Request >= r.Seq || !audit.IsHash(r.RequestSHA256) || (r.StreamSHA256 != "" && !audit.IsHash(r.StreamSHA256)) {
			return fmt.Errorf("response %d: its request reference or stream hash is malformed", r.Seq)
		}
	}
	return nil
}
