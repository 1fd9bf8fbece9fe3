package backup

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/logs/consultlog"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

// The trees a backup copies as they are, besides the two logs: every
// regular file under each, at any depth. broker/ is copied only in part
// (its sessions/; run/ is per-call scratch, and the logs are taken by
// their heads).
var trees = []*layout.Entry{&layout.Config, &layout.Grants, &layout.MCP, &layout.Jobs, &layout.Sessions, &layout.Memory,
	&layout.Gateway, &layout.LoopState, &layout.Proposals, &layout.Attachments, &layout.Images}

// brokerSessions is brokerd's session state under broker/.
const brokerSessions = "broker/sessions"

// taken are the other entries a backup holds: the logs (to their heads)
// and the state's format.
var taken = []*layout.Entry{&layout.Audit, &layout.ConsultLog, &layout.FormatFile}

// Part is an entry of the layout table a backup holds only in part, or
// not at all, and why.
type Part struct {
	Entry *layout.Entry
	Why   string
}

// partly are the entries a backup holds in part: what it takes and why
// the rest is left.
var partly = []Part{
	{&layout.State, "the state directory itself: restore makes it, with the table's mode"},
	{&layout.Broker, "broker/: its sessions/ and the two logs are taken; run/ is per-call scratch"},
	{&layout.Index, "index/: the fleet outbox (" + OutboxPath + ") is taken through SQLite; the recall index is left out, memoryd rebuilds it from sessions/ and notes.md at its start"},
}

// leftOut are the entries no backup holds, and why: each is rebuilt or
// is never to be copied.
var leftOut = []Part{
	{&layout.Secrets, "secrets/: never in a backup; the credentials list says what the restored stack needs"},
	{&layout.Logs, "logs/: each role's output under bxctl up, written again as the roles run"},
	{&layout.Run, "run/: the sockets, made again by the roles that listen on them"},
	{&layout.Outbox, "outbox/: files a post_file call staged for the answer post of a turn still running; a restored stack has no such turn, and the file is still where the tool wrote it"},
	{&layout.Metrics, "metrics/: figures bxctl metrics and bxctl audit anchor write again from the logs and the owner's anchors"},
}

// leftOutText is the manifest's account of what a backup leaves, and why.
func leftOutText() []string {
	var out []string
	for _, p := range append(append([]Part{}, partly[1:]...), leftOut...) {
		out = append(out, p.Why)
	}
	return out
}

// Tries bounds how often the two logs are copied before a backup gives
// up because brokerd never paused between appends.
const Tries = 100

// Take writes a backup of state into dest (missing, or an empty
// directory) while the stack may run, and returns its manifest.
func Take(state, dest string, now time.Time) (*Manifest, error) {
	state = filepath.Clean(state)
	if ents, err := os.ReadDir(dest); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("backup: %s is not empty: a backup goes into a new directory; see docs/runbook.md#backup-failed", dest)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("backup: %w; see docs/runbook.md#backup-failed", err)
	}
	format, err := layout.ReadFormat(state)
	if err != nil {
		return nil, err
	}
	if format > layout.Format {
		return nil, fmt.Errorf("backup: state %s has format %d, newer than the %d this bxctl knows: back it up with the Boxmaker that wrote it; see docs/runbook.md#state-newer", state, format, layout.Format)
	}
	if err := makeDest(dest); err != nil {
		return nil, fmt.Errorf("backup: %w; see docs/runbook.md#backup-failed", err)
	}
	if err := os.Mkdir(filepath.Join(dest, FilesDir), 0o700); err != nil {
		return nil, fmt.Errorf("backup: %w; see docs/runbook.md#backup-failed", err)
	}
	auditDir, consultDir := layout.Audit.In(state), layout.ConsultLog.In(state)
	m := &Manifest{Kind: Kind, Version: Version, Format: format, Taken: now.UTC().Format(time.RFC3339), Source: state,
		AuditLog: resolved(auditDir), ConsultLog: resolved(consultDir), LeftOut: leftOutText(), Dirs: []Dir{}, Files: []File{}}
	t := &taker{state: state, dest: filepath.Join(dest, FilesDir), m: m, dirs: map[string]bool{}}
	// The outbox before the session logs: what it says was filed is in
	// the logs copied after it (a record it names and the logs lacked
	// would be reused by the restored session's next turn and never
	// filed). broker/sessions before the logs: brokerd's session state
	// may be rebuilt from a longer log, never from a shorter one.
	err = t.outbox()
	if err == nil {
		err = t.tree(brokerSessions)
	}
	if err == nil {
		err = t.logs(auditDir, consultDir)
	}
	for _, e := range trees {
		if err == nil {
			err = t.tree(e.Path)
		}
	}
	if err == nil {
		err = t.file(layout.FormatFile.Path)
	}
	if err == nil {
		m.Credentials, err = credentials(state)
	}
	if err == nil {
		err = writeManifest(dest, m)
	}
	if err != nil {
		return nil, fmt.Errorf("backup: %w; see docs/runbook.md#backup-failed", err)
	}
	return m, nil
}

// resolved is dir absolute with its links resolved, as anchors name it.
func resolved(dir string) string {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		return r
	}
	return dir
}

type taker struct {
	state, dest string
	m           *Manifest
	dirs        map[string]bool
}

// mkdir records and makes rel (and the directories above it) in the
// backup with the source's modes.
func (t *taker) mkdir(rel string) error {
	if rel == "." || t.dirs[rel] {
		return nil
	}
	if err := t.mkdir(path.Dir(rel)); err != nil {
		return err
	}
	fi, err := os.Lstat(filepath.Join(t.state, rel))
	if err != nil {
		return err
	}
	t.dirs[rel] = true
	t.m.Dirs = append(t.m.Dirs, Dir{Path: rel, Mode: unixMode(fi)})
	return os.Mkdir(filepath.Join(t.dest, rel), 0o700)
}

func unixMode(fi fs.FileInfo) uint32 {
	m := uint32(fi.Mode().Perm())
	if fi.Mode()&fs.ModeSetgid != 0 {
		m |= 0o2000
	}
	return m
}

// tree copies every regular file under rel; a missing rel is nothing.
// Links are not followed, and names starting with a dot (a writer's
// temporary file) are passed over.
func (t *taker) tree(rel string) error {
	root := filepath.Join(t.state, rel)
	if _, err := os.Lstat(root); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed by its writer since it was listed
			}
			return err
		}
		r, _ := filepath.Rel(t.state, p)
		r = filepath.ToSlash(r)
		if strings.HasPrefix(d.Name(), ".") && p != root {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return t.mkdir(r)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		return t.file(r)
	})
}

// file copies the regular file rel; a *.jsonl file up to its last whole
// line (an append under way is not yet a line). A missing one is nothing.
func (t *taker) file(rel string) error {
	f, err := os.OpenFile(filepath.Join(t.state, rel), os.O_RDONLY|noFollow, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	if strings.HasSuffix(rel, ".jsonl") {
		b = b[:bytes.LastIndexByte(b, '\n')+1]
	}
	return t.write(rel, b, unixMode(fi))
}

// write puts b at rel in the backup and records it.
func (t *taker) write(rel string, b []byte, mode uint32) error {
	if err := t.mkdir(path.Dir(rel)); err != nil {
		return err
	}
	if err := create(filepath.Join(t.dest, rel), b); err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	t.m.Files = append(t.m.Files, File{Path: rel, Mode: mode & 0o777, Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:])})
	return nil
}

// logs copies the consult log and the audit log to their heads, as a
// pair: both heads must read the same, with no append under way, before
// and after the copy, or it is taken again (Tries times).
func (t *taker) logs(auditDir, consultDir string) error {
	for try := 0; try < Tries; try++ {
		if try > 0 {
			time.Sleep(time.Duration(10+try) * time.Millisecond)
		}
		ah, ch, err := heads(auditDir, consultDir)
		if err != nil {
			return err
		}
		if (ah != nil && ah.Next != "") || (ch != nil && ch.Next != "") {
			continue
		}
		al, aerr := auditLines(auditDir, ah)
		cl, cerr := consultLines(consultDir, ch)
		ah2, ch2, err := heads(auditDir, consultDir)
		if err != nil {
			return err
		}
		if !same(ah, ah2) || !same(ch, ch2) {
			continue
		}
		if err := errors.Join(aerr, cerr); err != nil {
			return err
		}
		if err := t.putLog(layout.Audit.Path, ah, al); err != nil {
			return err
		}
		if err := t.putLog(layout.ConsultLog.Path, ch, cl); err != nil {
			return err
		}
		if ah != nil {
			t.m.AuditSeq = ah.Seq
		}
		if ch != nil {
			t.m.ConsultSeq = ch.Seq
		}
		return nil
	}
	return fmt.Errorf("the audit and consult logs changed during each of %d copies (brokerd never paused between appends); try again", Tries)
}

func heads(auditDir, consultDir string) (*audit.Head, *audit.Head, error) {
	ah, err := audit.ReadHead(audit.HeadPath(auditDir))
	if err != nil {
		return nil, nil, fmt.Errorf("the audit log's head: %v", err)
	}
	ch, err := audit.ReadHead(audit.HeadPath(consultDir))
	if err != nil {
		return nil, nil, fmt.Errorf("the consult log's head: %v", err)
	}
	return ah, ch, nil
}

func same(a, b *audit.Head) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// logFile is one file of a log as copied.
type logFile struct {
	name string
	b    []byte
}

// auditLines reads the audit log's files up to the head's seq.
func auditLines(dir string, h *audit.Head) ([]logFile, error) {
	if h == nil {
		return nil, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if audit.IsLogName(e.Name()) && e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return upTo(dir, names, h)
}

func consultLines(dir string, h *audit.Head) ([]logFile, error) {
	if h == nil {
		return nil, nil
	}
	return upTo(dir, []string{consultlog.FileName}, h)
}

// upTo reads the lines of files in order up to seq h.Seq and checks the
// last one hashes to h.Hash.
func upTo(dir string, names []string, h *audit.Head) ([]logFile, error) {
	var out []logFile
	var n int64
	last := audit.Genesis
	for _, name := range names {
		if n == h.Seq {
			break
		}
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDONLY|noFollow, 0)
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		r := bufio.NewReaderSize(f, 64<<10)
		for n < h.Seq {
			line, err := r.ReadBytes('\n')
			if err != nil {
				break // the file ends (or an append under way): the next file, or too short
			}
			buf.Write(line)
			last = audit.LineHash(line[:len(line)-1])
			n++
		}
		f.Close()
		out = append(out, logFile{name, buf.Bytes()})
	}
	if n != h.Seq || last != h.Hash {
		return nil, fmt.Errorf("%s ends at seq %d, not at its head (seq %d): run bxctl audit verify; see docs/runbook.md#audit-head-differs", dir, n, h.Seq)
	}
	return out, nil
}

// putLog writes a log's copied files and its head (no append under way).
func (t *taker) putLog(rel string, h *audit.Head, files []logFile) error {
	if h == nil {
		return t.tree(rel) // no head: an empty log, or none
	}
	if err := t.mkdir(rel); err != nil {
		return err
	}
	for _, f := range files {
		if err := t.write(path.Join(rel, f.name), f.b, 0o600); err != nil {
			return err
		}
	}
	b, err := strict.Marshal(audit.Head{Seq: h.Seq, Hash: h.Hash})
	if err != nil {
		return err
	}
	return t.write(rel+".head", append(b, '\n'), 0o600)
}

// secretRef is a secret reference in a config's value (package secret).
var secretRef = regexp.MustCompile(`"((?:credential|env|file):[^"\s]+)"`)

// credentials lists what the restored stack needs that the backup does
// not hold: every secret reference in the configs, and every file
// secret under secrets/ by name.
func credentials(state string) ([]string, error) {
	out := []string{}
	cfgs, _ := filepath.Glob(layout.ConfigGlob(state))
	for _, c := range cfgs {
		b, err := os.ReadFile(c)
		if err != nil {
			continue // not readable by this user: the backup of it failed already
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			for _, m := range secretRef.FindAllStringSubmatch(line, -1) {
				out = append(out, "config/"+filepath.Base(c)+": "+m[1])
			}
		}
	}
	for _, e := range []*layout.Entry{&layout.GatewaySecrets, &layout.BrokerSecrets, &layout.MemorySecrets} {
		ents, _ := os.ReadDir(e.In(state))
		for _, d := range ents {
			out = append(out, e.Path+"/"+d.Name()+": a file secret, not in the backup")
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// writeManifest writes the manifest last, atomically: a backup without
// one is not a backup.
func writeManifest(dest string, m *Manifest) error {
	b, err := strict.Marshal(m)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dest, "."+ManifestName)
	if err := create(tmp, append(b, '\n')); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dest, ManifestName))
}

// makeDest makes dest, a backup's directory, the caller's and private
// (0700): a directory that already exists is taken only if it is that
// already and empty, since whoever else can write into it could swap a
// file of the backup or read it.
func makeDest(dest string) error {
	if err := os.MkdirAll(filepath.Dir(dest), 0o700); err != nil {
		return err
	}
	err := os.Mkdir(dest, 0o700)
	if err == nil || !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dest)
	if err != nil {
		return err
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || st == nil || int(st.Uid) != os.Geteuid() || fi.Mode().Perm() != 0o700 {
		return fmt.Errorf("%s exists and is not a directory of yours with mode 0700 (it is %s, mode %s): give a new path, or empty it and chmod 700 it", dest, fi.Mode().Type(), fi.Mode().Perm())
	}
	if ents, err := os.ReadDir(dest); err != nil || len(ents) > 0 {
		return fmt.Errorf("%s is not empty: a backup goes into a new directory", dest)
	}
	return nil
}

// create writes a new file of the backup (0600): never over a file or
// through a link that is already there.
func create(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	return errors.Join(err, f.Close())
}

// hashFile is the SHA-256 and size of the file at p.
func hashFile(p string) (string, int64, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	return hex.EncodeToString(h.Sum(nil)), n, err
}
