package audit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

// The head record (see the package doc).
//
// A chain that checks itself cannot tell a log from the same log with its
// newest lines gone, its last file deleted, a well-chained line added or
// every line re-chained after an edit. So the writer also records the
// head it wrote, outside the log's directory ([HeadPath]), and [Open]
// refuses a log that does not end there. Each append writes the head
// twice, each time atomically (temporary file, fsync, rename, directory
// fsync):
//
//  1. before the line: {seq, hash} of the current end and next, the hash
//     of the line about to be written;
//  2. after the line is fsynced: {seq, hash} of that line, no next.
//
// So a log may end one line past the head only while next says which
// line that is (a crash between 1 and 2; or the line was cut short,
// which the recovery of a torn line then describes); in every other case
// it must end exactly at the head. This stops accidents and partial
// edits; a writer with brokerd's uid can rewrite both, which is what the
// owner's anchors ([Anchor]) are for.

// HeadPath is where the writer of the log in dir records its head: beside
// the directory, not in it (STATE/audit.head for STATE/audit), so that
// deleting the log's files leaves the record that they existed.
func HeadPath(dir string) string { return filepath.Clean(dir) + ".head" }

// Head is the writer's record of the end of the log.
type Head struct {
	Seq  int64  `json:"seq"`            // the last line written; 0 for none
	Hash string `json:"hash"`           // its hash; Genesis for none
	Next string `json:"next,omitempty"` // while an append is under way: the hash of its line
}

// maxHead caps a head file: one short line.
const maxHead = 512

// ParseHead decodes a head file strictly: one canonical line.
func ParseHead(b []byte) (Head, error) {
	var h Head
	if len(b) > maxHead {
		return Head{}, fmt.Errorf("parse head: %d bytes, over %d", len(b), maxHead)
	}
	line, ok := bytes.CutSuffix(b, []byte("\n"))
	if !ok {
		return Head{}, errors.New("parse head: no final newline (the write was cut short)")
	}
	if err := strict.Unmarshal(line, &h); err != nil {
		return Head{}, fmt.Errorf("parse head: %w", err)
	}
	switch {
	case h.Seq < 0:
		return Head{}, fmt.Errorf("parse head: seq %d is negative", h.Seq)
	case !IsHash(h.Hash):
		return Head{}, fmt.Errorf("parse head: hash %q is not a lowercase hex SHA-256", h.Hash)
	case h.Seq == 0 && h.Hash != Genesis:
		return Head{}, errors.New("parse head: seq 0 must carry the genesis hash")
	case h.Next != "" && !IsHash(h.Next):
		return Head{}, fmt.Errorf("parse head: next %q is not a lowercase hex SHA-256", h.Next)
	}
	if again, _ := h.encode(); !bytes.Equal(again, b) {
		return Head{}, errors.New("parse head: not in canonical form")
	}
	return h, nil
}

func (h Head) encode() ([]byte, error) {
	b, err := strict.Marshal(h)
	return append(b, '\n'), err
}

// ReadHead reads the head file at path; nil when there is none. Package
// consultlog's head is read by this same code.
func ReadHead(path string) (*Head, error) {
	// Non-blocking, and only a regular file: a FIFO planted in its place
	// would otherwise hang brokerd's start and every verify.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxHead+1))
	if err != nil {
		return nil, err
	}
	h, err := ParseHead(b)
	if err != nil {
		return nil, err
	}
	return &h, nil
}

// WriteHead replaces the head file at path atomically and durably
// (temporary file, fsync, rename, directory fsync). A writer calls it
// twice per line: before the line, with Next its hash; after the line is
// fsynced, for that line. Package consultlog's writer does the same.
func WriteHead(path string, h Head) error {
	b, err := h.encode()
	if err != nil {
		return fmt.Errorf("write head: %w", err)
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write head: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(b)
	if err := errors.Join(werr, f.Chmod(0o600), f.Sync(), f.Close()); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write head: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write head: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("write head: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("write head: %w", err)
	}
	return nil
}

// HeadKind says how a log fails its head record.
type HeadKind int

// The ways a log can fail its head record, each with its runbook entry.
const (
	HeadMissing   HeadKind = iota + 1 // no head record, or one that does not read, for a log with lines
	HeadTruncated                     // the log ends before the head
	HeadDiffers                       // the line at the head is another, or the log goes on past it
)

// HeadLog names a log that keeps a head record, for the messages of the
// head judgment: package audit's own ([AuditHead]) and package
// consultlog's share the one judgment and differ only in these words.
type HeadLog struct {
	Name  string // "the audit log"
	Whole string // what a cut that removed most of it removed: "a whole day's file"
	// See is the runbook reference of each [HeadKind], and of a head
	// record that cannot be written (key 0): "see docs/runbook.md#...".
	See map[HeadKind]string
}

// AuditHead is the audit log's [HeadLog].
var AuditHead = &HeadLog{Name: "the audit log", Whole: "a whole day's file", See: map[HeadKind]string{
	0:             "see docs/runbook.md#audit-unavailable",
	HeadMissing:   "see docs/runbook.md#audit-head-missing",
	HeadTruncated: "see docs/runbook.md#audit-truncated",
	HeadDiffers:   "see docs/runbook.md#audit-head-differs",
}}

// HeadError is a log that does not end where its writer's head says.
type HeadError struct {
	Kind HeadKind
	Path string // the head file
	Msg  string
	Log  *HeadLog
}

func (e *HeadError) Error() string { return e.Msg + "; " + e.Log.See[e.Kind] }

// LogEnd is what the head judgment needs of a verified log.
type LogEnd struct {
	Pos  int64  // the last line read
	Last string // its hash (Genesis when Pos is 0)
	// At is the hash of an earlier line the verifier kept (the head's
	// seq is always kept); nil when the caller kept none.
	At func(seq int64) (string, bool)
	// Damaged: the last line is torn or does not parse, and may be
	// recovered (an append the writer was making when it stopped).
	Damaged bool
}

// CheckHead checks the end of a log against its head record h (nil:
// none), as read from path by [ReadHead] with error herr. It is the one
// judgment every writer's start and every verify makes, for the audit
// log and the consult log alike.
func CheckHead(log *HeadLog, path string, h *Head, herr error, e LogEnd) *HeadError {
	fail := func(k HeadKind, format string, args ...any) *HeadError {
		return &HeadError{Kind: k, Path: path, Log: log, Msg: fmt.Sprintf(format, args...)}
	}
	if herr != nil {
		return fail(HeadMissing, "the record of %s's head, %s, does not read: %v", log.Name, path, herr)
	}
	if h == nil {
		if e.Pos == 0 {
			return nil
		}
		return fail(HeadMissing, "%s has %d lines but its writer's record of the head, %s, is missing", log.Name, e.Pos, path)
	}
	s := h.Seq
	hashAt := func(seq int64) (string, bool) {
		switch {
		case seq == 0:
			return Genesis, true
		case seq == e.Pos:
			return e.Last, true
		case e.At == nil:
			return "", false
		}
		return e.At(seq)
	}
	switch {
	case e.Pos < s:
		return fail(HeadTruncated, "%s ends at seq %d, but brokerd wrote up to seq %d (%s): its newest records, or %s, were removed", log.Name, e.Pos, s, path, log.Whole)
	case e.Pos > s+1 || (e.Pos == s+1 && h.Next == ""):
		return fail(HeadDiffers, "%s goes on to seq %d, past seq %d, the last record brokerd wrote (%s): seq %d on were not written by brokerd", log.Name, e.Pos, s, path, s+1)
	}
	if got, ok := hashAt(s); !ok || got != h.Hash {
		return fail(HeadDiffers, "the line at seq %d hashes to %s, but brokerd wrote %s there (%s): the log was rewritten from that line or before it", s, got, h.Hash, path)
	}
	if e.Pos == s+1 && e.Last != h.Next && !e.Damaged {
		return fail(HeadDiffers, "the line at seq %d hashes to %s, but the line brokerd was writing there hashes to %s (%s)", e.Pos, e.Last, h.Next, path)
	}
	return nil
}

// StartHead is a writer's start: it checks the log's end against the head
// record ([CheckHead]) and, when the log may go on, records that end as
// the head (settling an append a crash left under way). It returns the
// head now on disk.
func StartHead(log *HeadLog, path string, h *Head, herr error, e LogEnd) (Head, error) {
	if p := CheckHead(log, path, h, herr, e); p != nil {
		return Head{}, p
	}
	end := Head{Seq: e.Pos, Hash: e.Last}
	if h != nil && *h == end {
		return end, nil
	}
	if err := WriteHead(path, end); err != nil {
		return Head{}, fmt.Errorf("%v; %s", err, log.See[0])
	}
	return end, nil
}

// ReplaceHead is the owner's adoption of a log as it is: it moves the
// head record at path aside (to path + ".replaced-" + the time, so
// nothing is lost) and records h. It returns the old head, nil if there
// was none or it did not read (it is kept aside as it was).
func ReplaceHead(path string, h Head, now time.Time) (*Head, error) {
	old, rerr := ReadHead(path)
	if _, err := os.Lstat(path); err == nil {
		aside := path + ".replaced-" + now.UTC().Format("20060102T150405.000000000Z")
		if err := os.Rename(path, aside); err != nil {
			return nil, fmt.Errorf("keep the old record: %v", err)
		}
	}
	if rerr != nil {
		old = nil
	}
	if err := WriteHead(path, h); err != nil {
		return nil, err
	}
	return old, nil
}

// AdoptHead is brokerd --adopt-audit-head: the owner's decision that the
// log as it is now is the log. It reads the whole log, moves the old head
// record aside (to HeadPath(dir) + ".replaced-" + the time, so nothing is
// lost) and records the log's end as the head. It returns the old head
// (nil if there was none) and the new one. brokerd must not be running.
func AdoptHead(dir string, now time.Time) (*Head, Head, error) {
	files, err := listLogs(dir)
	if err != nil {
		return nil, Head{}, fmt.Errorf("adopt audit head: %v; see docs/runbook.md#audit-unreadable", err)
	}
	v := newVerifier()
	v.files = len(files)
	v.run(&source{dir: dir, files: files})
	if p := v.region; p != nil && p.Unreadable {
		return nil, Head{}, fmt.Errorf("adopt audit head: %w", p)
	}
	h := Head{Seq: v.pos, Hash: hashHex(v.prev)}
	old, err := ReplaceHead(HeadPath(dir), h, now)
	if err != nil {
		return nil, Head{}, fmt.Errorf("adopt audit head: %v", err)
	}
	return old, h, nil
}
