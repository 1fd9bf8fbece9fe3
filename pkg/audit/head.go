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

	"wntrmute.dev/boxmaker/pkg/strict"
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

// readHead reads the head file at path; nil when there is none.
func readHead(path string) (*Head, error) {
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

// writeHead replaces the head file at path atomically and durably.
func writeHead(path string, h Head) error {
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

// HeadError is a log that does not end where its writer's head says.
type HeadError struct {
	Kind HeadKind
	Path string // the head file
	Msg  string
}

func (e *HeadError) Error() string {
	see := map[HeadKind]string{
		HeadMissing:   "see docs/runbook.md#audit-head-missing",
		HeadTruncated: "see docs/runbook.md#audit-truncated",
		HeadDiffers:   "see docs/runbook.md#audit-head-differs",
	}[e.Kind]
	return e.Msg + "; " + see
}

// headHashes is what the head judgment needs of a verified log.
type headHashes struct {
	pos      int64
	last     string // hash of line pos (Genesis when pos is 0)
	at       func(seq int64) (string, bool)
	damaged  bool // the last line is torn or does not parse, and may be recovered
	headPath string
}

// judgeHead checks the end of the log against the head record h (nil:
// none). It is the one judgment [Open], [AcceptBreak] and [VerifyEnd] make.
func judgeHead(h *Head, l headHashes) *HeadError {
	fail := func(k HeadKind, format string, args ...any) *HeadError {
		return &HeadError{Kind: k, Path: l.headPath, Msg: fmt.Sprintf(format, args...)}
	}
	if h == nil {
		if l.pos == 0 {
			return nil
		}
		return fail(HeadMissing, "the audit log has %d lines but its writer's record of the head, %s, is missing", l.pos, l.headPath)
	}
	s := h.Seq
	hashAt := func(seq int64) (string, bool) {
		if seq == 0 {
			return Genesis, true
		}
		if seq == l.pos {
			return l.last, true
		}
		return l.at(seq)
	}
	switch {
	case l.pos < s:
		return fail(HeadTruncated, "the audit log ends at seq %d, but brokerd wrote up to seq %d (%s): its newest records, or a whole day's file, were removed", l.pos, s, l.headPath)
	case l.pos > s+1 || (l.pos == s+1 && h.Next == ""):
		return fail(HeadDiffers, "the audit log goes on to seq %d, past seq %d, the last record brokerd wrote (%s): seq %d on were not written by brokerd", l.pos, s, l.headPath, s+1)
	}
	if got, ok := hashAt(s); !ok || got != h.Hash {
		return fail(HeadDiffers, "the line at seq %d hashes to %s, but brokerd wrote %s there (%s): the log was rewritten from that line or before it", s, got, h.Hash, l.headPath)
	}
	if l.pos == s+1 && l.last != h.Next && !l.damaged {
		return fail(HeadDiffers, "the line at seq %d hashes to %s, but the line brokerd was writing there hashes to %s (%s)", l.pos, l.last, h.Next, l.headPath)
	}
	return nil
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
	path := HeadPath(dir)
	old, rerr := readHead(path)
	if _, err := os.Lstat(path); err == nil {
		aside := path + ".replaced-" + now.UTC().Format("20060102T150405.000000000Z")
		if err := os.Rename(path, aside); err != nil {
			return nil, Head{}, fmt.Errorf("adopt audit head: keep the old record: %v", err)
		}
	}
	if rerr != nil {
		old = nil // unreadable: kept aside as it was
	}
	h := Head{Seq: v.pos, Hash: hashHex(v.prev)}
	if err := writeHead(path, h); err != nil {
		return nil, Head{}, fmt.Errorf("adopt audit head: %v", err)
	}
	return old, h, nil
}
