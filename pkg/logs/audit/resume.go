package audit

import (
	"fmt"
	"path/filepath"
)

// resumeFiles is how many of the latest files an ordinary start checks.
// Two, not one: an ask decision may wait a day for its approval, and a
// writer must know whether the decision an approval or result names is
// still waiting, so it reads every record it may be asked to answer.
const resumeFiles = 2

// resume prepares the check of an ordinary writer start: the latest
// resumeFiles files, chained from the last line of the file before them,
// with the lines before counted for seq. It returns nil when the whole log
// must be checked instead: when there are no more files than that, or
// when the line it would chain from, or the previous file's last line, is
// missing, torn or does not parse (damage there may be what a record in
// the checked files recovers or accepts).
func resume(dir string, files []string) (*verifier, *source, error) {
	if len(files) <= resumeFiles {
		return nil, nil, nil
	}
	checked := files[len(files)-resumeFiles:]
	seedFile := files[len(files)-resumeFiles-1]
	seed, err := lastLine(dir, seedFile)
	if err != nil || seed == nil {
		return nil, nil, err
	}
	if prev, err := lastLine(dir, files[len(files)-2]); err != nil || prev == nil {
		return nil, nil, err
	}
	var base int64
	for _, f := range files[:len(files)-resumeFiles-1] {
		n, err := countLines(filepath.Join(dir, f))
		if err != nil {
			return nil, nil, fmt.Errorf("count lines of %s: %w", f, err)
		}
		base += n
	}
	seed.pos = base + int64(seed.n)
	v := newVerifier()
	v.startFile, v.files = checked[0], len(files)
	v.pos, v.prev, v.last = seed.pos, seed.sum, seed
	v.gaps = []span{{1, seed.pos + 1}}
	return v, &source{dir: dir, files: checked, pos: seed.pos}, nil
}

// lastLine reads the last line of a file; nil when it is empty, or when
// its last line is torn or does not parse.
func lastLine(dir, file string) (*line, error) {
	src := &source{dir: dir, files: []string{file}}
	var last *line
	for {
		l, err := src.read()
		if err != nil {
			return nil, err
		}
		if l == nil {
			break
		}
		last = l
	}
	if last == nil || last.torn {
		return nil, nil
	}
	if _, err := last.parse(); err != nil {
		return nil, nil
	}
	return last, nil
}
