package layout

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Format is the state directory's format this build reads and writes:
// what the files under it hold and where. It changes only when a file's
// meaning or place changes; a release that changes it ships the steps
// from the format before (package migrate) and takes a backup before
// running them.
//
// Format 0 is a state directory made before the format was recorded: it
// has no format file, and its files are what format 1's are, so every
// daemon runs it as it is.
const Format = 1

// OldestFormat is the oldest format this build's daemons run as it is;
// an older one refuses to start until `bxctl migrate` brings it forward.
const OldestFormat = 0

// FormatFile records the state directory's format: one line, the
// number. Every role reads it before anything else at start-up; only
// bxctl, as the owner, writes it (up and install on a new state
// directory, migrate after its backup).
var FormatFile = Entry{Path: "format", Kind: File, Mode: 0o644, Writer: "bxctl", Owner: Owner,
	Doc:   "the state directory's format version (one number); a daemon refuses a newer one than it knows",
	Rests: "0644 the owner's: every role reads it, only bxctl (the owner) writes it"}

// ReadFormat is state's recorded format: 0 without a format file. The
// file must be a regular file (not a link) owned by root or the state
// directory's owner and writable by no one else, holding one decimal
// number and a newline.
func ReadFormat(state string) (int, error) {
	p := FormatFile.In(state)
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("format: %w; see docs/runbook.md#state-format", err)
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("format %s is a symbolic link or not a regular file; see docs/runbook.md#layout-link", p)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return 0, fmt.Errorf("format %s has mode %04o: others can write it; see docs/runbook.md#layout-writable", p, fi.Mode().Perm())
	}
	// Only root or the state directory's owner (bxctl's runner) writes it.
	if sfi, err := os.Stat(state); err == nil {
		if o := statOf(fi).Uid; o != 0 && o != statOf(sfi).Uid {
			return 0, fmt.Errorf("format %s is owned by uid %d, not root or the state directory's owner; see docs/runbook.md#layout-owner", p, o)
		}
	}
	b, err := os.ReadFile(filepath.Clean(p))
	if err != nil {
		return 0, fmt.Errorf("format: %w; see docs/runbook.md#state-format", err)
	}
	return ParseFormat(string(b), p)
}

// ParseFormat parses a format file's text strictly: digits and one
// newline, nothing else (no sign, no spaces, no leading zero).
func ParseFormat(text, name string) (int, error) {
	s, ok := strings.CutSuffix(text, "\n")
	bad := !ok || s == "" || len(s) > 9 || (len(s) > 1 && s[0] == '0') || strings.Trim(s, "0123456789") != ""
	if bad {
		return 0, fmt.Errorf("format %s holds %q, not one number and a newline; see docs/runbook.md#state-format", name, truncateText(text))
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("format %s: %v; see docs/runbook.md#state-format", name, err)
	}
	return n, nil
}

func truncateText(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// FormatText is the format file's text for format n.
func FormatText(n int) string { return strconv.Itoa(n) + "\n" }

// CheckFormat is what every role checks first at start-up, before the
// layout (a newer format may have moved what the layout check looks
// at): a format newer than [Format] is refused, with the way back; one
// older than [OldestFormat] is refused, with the way forward; the rest
// is run as it is. It returns the format found.
func CheckFormat(state, role string) (int, error) {
	return checkFormat(state, role, Format, OldestFormat)
}

// checkFormat is CheckFormat for a build that knows current and runs
// formats from oldest up.
func checkFormat(state, role string, current, oldest int) (int, error) {
	n, err := ReadFormat(state)
	if err != nil {
		return 0, err
	}
	switch {
	case n > current:
		return n, fmt.Errorf("state %s has format %d, newer than the %d this %s knows: a newer Boxmaker wrote it; run that version, or restore the backup taken before the upgrade; see docs/runbook.md#state-newer",
			state, n, current, role)
	case n < oldest:
		return n, fmt.Errorf("state %s has format %d, older than the oldest (%d) this %s runs: run bxctl migrate (it takes a backup first); see docs/runbook.md#state-older",
			state, n, oldest, role)
	}
	return n, nil
}

// Fresh reports whether state is yet to be made: missing, or an empty
// directory. bxctl records the format only in a state directory it
// makes; one that holds anything was made before and keeps its format
// until `bxctl migrate` moves it on.
func Fresh(state string) (bool, error) {
	ents, err := os.ReadDir(state)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("state %s: %w", state, err)
	}
	return len(ents) == 0, nil
}

// WriteFormat records format n in state: a new file renamed over the
// old one, so a reader sees the old number or the new, never a part. Its
// mode is the table's for state's users (0600 when one user runs every
// role, as a bxctl up without root makes it).
func WriteFormat(state string, n int) error {
	p := FormatFile.In(state)
	users, err := LoadUsers(state)
	if err != nil {
		return fmt.Errorf("format: %w", err)
	}
	tmp, err := os.CreateTemp(state, ".format-*")
	if err != nil {
		return fmt.Errorf("format: %w", err)
	}
	_, werr := tmp.WriteString(FormatText(n))
	err = errors.Join(werr, tmp.Chmod(FormatFile.ModeFor(users)), tmp.Sync(), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("format: %w", err)
	}
	return nil
}
