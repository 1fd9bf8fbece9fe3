package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/sanitize"
)

// identity checks each identity file as memoryd does before it builds
// the identity block: within its limit in characters ([wire.IdentityLimit],
// memoryd's own table) and passing the write check ([sanitize.Check]). A
// file that fails either makes memoryd refuse the block, and loopd then
// refuses every new session. A missing file is fine: memoryd makes it.
func (a *auditor) identity(in *install) {
	if !in.has("memoryd") || in.mem.StateDir == "" {
		return
	}
	dir := layout.Memory.In(in.mem.StateDir)
	names := make([]string, 0, len(wire.IdentityLimit))
	for n := range wire.IdentityLimit {
		names = append(names, n)
	}
	sort.Strings(names)
	var problems, seen []string
	for _, name := range names {
		limit := wire.IdentityLimit[name]
		path := filepath.Join(dir, name)
		// A character is at most 4 bytes: a bigger file is over its limit.
		b, err := readCapped(path, int64(4*limit))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %v (its limit is %d characters)", name, err, limit))
			continue
		case !utf8.Valid(b):
			problems = append(problems, fmt.Sprintf("%s is not UTF-8", name))
			continue
		}
		n := utf8.RuneCount(b)
		if n > limit {
			problems = append(problems, fmt.Sprintf("%s has %d characters, over its limit of %d", name, n, limit))
			continue
		}
		if err := sanitize.Check(string(b)); err != nil {
			problems = append(problems, fmt.Sprintf("%s fails the write check: %v", name, err))
			continue
		}
		seen = append(seen, fmt.Sprintf("%s %d/%d", name, n, limit))
	}
	switch {
	case len(problems) > 0:
		a.add("doctor-identity", Problem, "%s", strings.Join(problems, "; "))
	case len(seen) == 0:
		a.add("doctor-identity", OK, "no identity files yet in %s (memoryd makes them)", dir)
	default:
		a.add("doctor-identity", OK, "within their limits and passing the write check: %s", strings.Join(seen, ", "))
	}
}
