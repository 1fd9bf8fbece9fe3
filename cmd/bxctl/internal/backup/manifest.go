// Package backup is `bxctl backup` and `bxctl restore`: a consistent
// snapshot of a state directory taken while the stack runs, and its
// restore into an empty directory, verified before it is put in place.
//
// Invariants:
//   - a backup holds no secret: secrets/ is left out, and the manifest
//     names each credential the configs refer to and each file secret by
//     name only;
//   - every file in a backup is named in its manifest with its size and
//     SHA-256, and restore refuses a backup with a file that differs,
//     is missing or is not named, before it writes anything;
//   - the audit log and the consult log are copied to their head records
//     and are a pair that existed together: both heads read the same,
//     with no append under way, before and after the copy (else it is
//     taken again);
//   - an append-only log (*.jsonl) is copied up to its last whole line;
//   - restore writes into a new directory beside the target and renames
//     it into place only after the audit and consult chains, every
//     session log, the identity files and the grants verified: a state
//     directory is either the verified backup or untouched;
//   - every entry of the layout table is held, held in part or left out
//     with its reason (taken, partly, leftOut; a test keeps them
//     whole): the recall index is left out (memoryd rebuilds it), the
//     fleet outbox, which nothing rebuilds, is taken through SQLite's
//     VACUUM INTO and checked by SQLite's integrity check on restore.
package backup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

// Kind and Version name a backup's manifest format.
const (
	Kind    = "boxmaker-backup"
	Version = 1
)

// ManifestName is the manifest's file in a backup; the state's files are
// under FilesDir.
const (
	ManifestName = "manifest.json"
	FilesDir     = "files"
)

// Manifest is what a backup holds and where it came from.
type Manifest struct {
	Kind    string `json:"kind"`
	Version int    `json:"version"`
	// Format is the state directory's format (package layout).
	Format int    `json:"format"`
	Taken  string `json:"taken"` // RFC 3339, UTC
	// Source is the state directory backed up; AuditLog and ConsultLog
	// are its logs' directories as the owner's anchors name them
	// (absolute, links resolved).
	Source     string `json:"source"`
	AuditLog   string `json:"audit_log"`
	ConsultLog string `json:"consult_log"`
	// AuditSeq and ConsultSeq are where the copied logs end.
	AuditSeq   int64  `json:"audit_seq"`
	ConsultSeq int64  `json:"consult_seq"`
	Dirs       []Dir  `json:"dirs"`
	Files      []File `json:"files"`
	// LeftOut says what the backup does not hold and why.
	LeftOut []string `json:"left_out"`
	// Credentials are the secrets the restored stack needs and the
	// backup does not hold: each reference a config makes, and each
	// file secret by name.
	Credentials []string `json:"credentials"`
}

// Dir is a directory of the state, relative and slash-separated.
type Dir struct {
	Path string `json:"path"`
	Mode uint32 `json:"mode"` // permission and setgid bits, as chmod takes them
}

// File is one file of the state.
type File struct {
	Path   string `json:"path"`
	Mode   uint32 `json:"mode"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// maxManifest caps a manifest's size.
const maxManifest = 64 << 20

// ReadManifest reads and checks the manifest of the backup in src.
func ReadManifest(src string) (*Manifest, error) {
	p := filepath.Join(src, ManifestName)
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, corrupt(ManifestName, "cannot be read: %v (no manifest: not a backup, or one cut short)", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxManifest {
		return nil, corrupt(ManifestName, "is not a regular file under %d bytes", maxManifest)
	}
	b, err := readFile(p, maxManifest)
	if err != nil {
		return nil, corrupt(ManifestName, "cannot be read: %v", err)
	}
	var m Manifest
	if err := strict.Unmarshal(b, &m); err != nil {
		return nil, corrupt(ManifestName, "does not decode: %v", err)
	}
	if m.Kind != Kind || m.Version != Version {
		return nil, corrupt(ManifestName, "is %q version %d, not %q version %d", m.Kind, m.Version, Kind, Version)
	}
	if _, err := time.Parse(time.RFC3339, m.Taken); err != nil {
		return nil, corrupt(ManifestName, "says it was taken at %q, not an RFC 3339 time", m.Taken)
	}
	seen := map[string]bool{}
	for _, d := range m.Dirs {
		if !clean(d.Path) || seen[d.Path] || d.Mode&^0o2777 != 0 {
			return nil, corrupt(ManifestName, "names directory %q twice, outside the state, or with mode %o", d.Path, d.Mode)
		}
		seen[d.Path] = true
	}
	for _, f := range m.Files {
		if !clean(f.Path) || seen[f.Path] || f.Mode&^0o777 != 0 || f.Size < 0 || len(f.SHA256) != 64 || !seen[path.Dir(f.Path)] && path.Dir(f.Path) != "." {
			return nil, corrupt(ManifestName, "names file %q twice, outside the state, in no directory it lists, or with a bad mode, size or hash", f.Path)
		}
		seen[f.Path] = true
	}
	return &m, nil
}

// clean is whether p is a clean relative path inside the state.
func clean(p string) bool {
	return p != "" && p != "." && !path.IsAbs(p) && path.Clean(p) == p && !strings.HasPrefix(p, "../") && p != ".." && !strings.ContainsRune(p, 0)
}

// A CorruptError is a backup that is not what its manifest says; File
// names the file (relative to the backup).
type CorruptError struct {
	File string
	Msg  string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("backup: %s %s; see docs/runbook.md#restore-corrupt", e.File, e.Msg)
}

func corrupt(file, format string, args ...any) error {
	return &CorruptError{File: file, Msg: fmt.Sprintf(format, args...)}
}

// CheckFiles checks that src holds exactly the manifest's files under
// FilesDir, each with its size and SHA-256, and its directories, and
// nothing else.
func (m *Manifest) CheckFiles(src string) error {
	root := filepath.Join(src, FilesDir)
	want := map[string]*File{}
	dirs := map[string]bool{}
	for i := range m.Files {
		want[m.Files[i].Path] = &m.Files[i]
	}
	for _, d := range m.Dirs {
		dirs[d.Path] = true
	}
	found := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return corrupt(FilesDir, "cannot be read: %v", err)
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		name := path.Join(FilesDir, rel)
		switch {
		case d.IsDir():
			if !dirs[rel] {
				return corrupt(name, "is a directory the manifest does not list")
			}
			return nil
		case !d.Type().IsRegular():
			return corrupt(name, "is not a regular file")
		}
		f := want[rel]
		if f == nil {
			return corrupt(name, "is not in the manifest (added after the backup was taken)")
		}
		sum, n, err := hashFile(p)
		if err != nil {
			return corrupt(name, "cannot be read: %v", err)
		}
		if n != f.Size || sum != f.SHA256 {
			return corrupt(name, "differs from the manifest: %d bytes, sha256 %s; the manifest says %d bytes, %s", n, sum, f.Size, f.SHA256)
		}
		found[rel] = true
		return nil
	})
	if err != nil {
		var ce *CorruptError
		if errors.As(err, &ce) {
			return err
		}
		return corrupt(FilesDir, "%v", err)
	}
	var missing []string
	for p := range want {
		if !found[p] {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return corrupt(path.Join(FilesDir, missing[0]), "is missing (%d file(s) the manifest lists are)", len(missing))
	}
	return nil
}
