package grant

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"wntrmute.dev/boxmaker/pkg/host/config"
	"wntrmute.dev/boxmaker/pkg/host/ownership"
	"wntrmute.dev/boxmaker/pkg/text/escape"
)

// Problem is one reason a grant directory is invalid.
type Problem struct {
	File   string // the file's path ("" for a problem with the directory)
	Grant  string // the grant: its id, or "#N" (its place in the file) when the id is unusable; "" for a file-level problem
	Reason string
}

func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File + ": ")
	}
	if p.Grant != "" {
		b.WriteString("grant " + p.Grant + ": ")
	}
	b.WriteString(p.Reason)
	return escape.Line(b.String())
}

// LoadError is the error of a grant directory that is invalid: every
// problem found, in file order.
type LoadError struct {
	Dir      string
	Problems []Problem
}

func (e *LoadError) Error() string {
	first := ""
	if len(e.Problems) > 0 {
		first = ": " + e.Problems[0].String()
	}
	return fmt.Sprintf("grants in %s are invalid (%d problems)%s; every call is denied until they are fixed; see docs/runbook.md#grants-invalid", e.Dir, len(e.Problems), first)
}

// Set is a valid set of grants: every one parsed, ids unique. A nil *Set
// (what [LoadDir] returns with an error) and the zero Set are not valid,
// and brokerd denies every call with either.
type Set struct {
	grants []Grant
	files  []string
	ok     bool
}

// Valid reports whether s came from [LoadDir] or [NewSet].
func (s *Set) Valid() bool { return s != nil && s.ok }

// Grants returns the grants, in file order then in order within a file.
func (s *Set) Grants() []Grant {
	if !s.Valid() {
		return nil
	}
	return slices.Clone(s.grants)
}

// Files returns the grant files the set was loaded from, sorted.
func (s *Set) Files() []string {
	if !s.Valid() {
		return nil
	}
	return slices.Clone(s.files)
}

// Len is the number of grants.
func (s *Set) Len() int {
	if !s.Valid() {
		return 0
	}
	return len(s.grants)
}

// NewSet makes a set from grants already parsed, refusing duplicate ids.
func NewSet(grants ...Grant) (*Set, error) {
	if ps := duplicates(grants); len(ps) > 0 {
		return nil, &LoadError{Dir: "(grants)", Problems: ps}
	}
	files := []string{}
	for _, g := range grants {
		if g.id == "" {
			return nil, &LoadError{Dir: "(grants)", Problems: []Problem{{Reason: "a grant was not made by grant.New"}}}
		}
		if g.file != "" && !slices.Contains(files, g.file) {
			files = append(files, g.file)
		}
	}
	slices.Sort(files)
	return &Set{grants: slices.Clone(grants), files: files, ok: true}, nil
}

func duplicates(grants []Grant) []Problem {
	var ps []Problem
	first := map[string]Grant{}
	for _, g := range grants {
		if f, dup := first[g.id]; dup {
			ps = append(ps, Problem{File: g.file, Grant: g.id, Reason: fmt.Sprintf("id is also used in %s; ids must be unique across the directory", f.file)})
			continue
		}
		first[g.id] = g
	}
	return ps
}

// LoadDir loads every grant file in dir. Files named *.toml are grant
// files; files named *.md are documentation and skipped; any other entry
// (a subdirectory, a *.toml.bak, an editor's swap file, a link to nothing)
// is a problem, because a grant put where it is not read is a grant
// silently ignored. An empty directory is a valid set with no grants.
//
// Grants are the only authority there is, so the directory and every
// grant file (and each link's target, and every directory on the way)
// must pass [ownership.Owners.Check] with owners: written only by root or
// the owner, writable by no one else. Each one that does not is a problem.
//
// On any problem it returns a nil *Set and a *[LoadError] listing them.
func LoadDir(dir string, owners ownership.Owners) (*Set, error) {
	fail := func(ps ...Problem) (*Set, error) { return nil, &LoadError{Dir: dir, Problems: ps} }
	if _, err := owners.Check(dir); err != nil {
		return fail(Problem{File: dir, Reason: ownerReason(dir, err, "cannot read the grant directory")})
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fail(Problem{File: dir, Reason: fmt.Sprintf("cannot read the grant directory: %v", err)})
	}
	var problems []Problem
	var grants []Grant
	var files []string
	for _, e := range entries {
		name := e.Name()
		full := filepath.Join(dir, name)
		switch {
		case strings.HasSuffix(name, ".toml"):
		case strings.HasSuffix(name, ".md"):
			continue
		default:
			problems = append(problems, Problem{File: full, Reason: "not a grant file (*.toml) or documentation (*.md); move it out of the grant directory"})
			continue
		}
		// ReadFile follows links (the NixOS module links files from the
		// store), judging each target, and reads only a regular file.
		data, err := owners.ReadFile(full, config.MaxSize)
		if err != nil {
			problems = append(problems, Problem{File: full, Reason: ownerReason(full, err, "cannot read")})
			continue
		}
		gs, ps := ParseFile(full, data)
		problems = append(problems, ps...)
		grants = append(grants, gs...)
		files = append(files, full)
	}
	problems = append(problems, duplicates(grants)...)
	if len(problems) > 0 {
		return fail(problems...)
	}
	slices.Sort(files)
	return &Set{grants: grants, files: files, ok: true}, nil
}

// ownerReason says why path could not be used: the ownership rule's
// reason, with its runbook entry, or what the read said.
func ownerReason(path string, err error, what string) string {
	var ue *ownership.UnsafeError
	if errors.As(err, &ue) {
		return ue.Explain() + ": only root and the owner may write a grant or a directory above it (see docs/runbook.md#owner-file-unsafe)"
	}
	// The problem names the file already.
	msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "check "+path+": "), "read "+path+": ")
	if strings.HasPrefix(msg, "not a regular file") || strings.HasPrefix(msg, "larger than") {
		return msg
	}
	return what + ": " + msg
}

// fileWire is the shape of a grant file.
type fileWire struct {
	Grant []Spec `toml:"grant"`
}

// ParseFile parses one grant file's text; name labels the problems. It
// returns the grants only when there are no problems.
func ParseFile(name string, data []byte) ([]Grant, []Problem) {
	var w fileWire
	if err := config.Decode(data, name, &w); err != nil {
		if ps := locate(name, data); len(ps) > 0 {
			return nil, ps
		}
		return nil, []Problem{{File: name, Grant: grantAtLine(data, errLine(err)), Reason: strings.TrimPrefix(err.Error(), "config "+name+": ")}}
	}
	if len(w.Grant) == 0 {
		return nil, []Problem{{File: name, Reason: "holds no [[grant]] tables; an empty grant file is refused in case its grants were lost"}}
	}
	var grants []Grant
	var problems []Problem
	for i, s := range w.Grant {
		g, err := New(name, s)
		if err != nil {
			problems = append(problems, Problem{File: name, Grant: label(s.ID, i), Reason: err.Error()})
			continue
		}
		grants = append(grants, g)
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return grants, nil
}

// label names a grant by its id when the id is usable, else by its place.
func label(id string, i int) string {
	if idPattern.MatchString(id) {
		return id
	}
	return fmt.Sprintf("#%d", i+1)
}
