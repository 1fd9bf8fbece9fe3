package install

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"wntrmute.dev/boxmaker/pkg/host/units"
)

// SubID is one /etc/subuid or /etc/subgid entry: the user (a name or a
// uid), the first subordinate id and how many.
type SubID struct {
	Owner        string
	Start, Count uint64
}

// ParseSubIDs reads a subuid or subgid file as shadow's tools write it:
// one "owner:start:count" per line; blank lines and "#" comments are
// skipped. Any other line is refused: an entry that cannot be read is a
// range whose overlap with brokerd's nobody can rule out.
func ParseSubIDs(b []byte) ([]SubID, error) {
	var out []SubID
	for i, l := range strings.Split(string(b), "\n") {
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		f := strings.Split(l, ":")
		if len(f) != 3 || f[0] == "" {
			return nil, fmt.Errorf("line %d is not owner:start:count", i+1)
		}
		start, err1 := strconv.ParseUint(f[1], 10, 32)
		count, err2 := strconv.ParseUint(f[2], 10, 32)
		if err1 != nil || err2 != nil || count == 0 {
			return nil, fmt.Errorf("line %d is not owner:start:count", i+1)
		}
		out = append(out, SubID{f[0], start, count})
	}
	return out, nil
}

// checkSubIDs decides, changing nothing, whether u's subordinate range
// is to be added: not when it has exactly that one in both files. It
// refuses another range of u's, and any other user's range that
// overlaps u's (Debian gives the second and third human users
// 165536:65536 and 231072:65536, both inside brokerd's 200000-265535):
// two users sharing subordinate ids can enter each other's containers.
func checkSubIDs(etc string, u units.User) (add bool, err error) {
	lo, hi := uint64(u.SubUIDStart), uint64(u.SubUIDStart)+uint64(u.SubUIDCount)
	mine := func(owner string) bool { return owner == u.Name || owner == strconv.FormatUint(uint64(u.UID), 10) }
	var errs []error
	for _, f := range []string{"subuid", "subgid"} {
		p := filepath.Join(etc, f)
		b, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return false, fmt.Errorf("install: read %s: %w", p, err)
		}
		ids, err := ParseSubIDs(b)
		if err != nil {
			errs = append(errs, Refusal{fmt.Sprintf("%s: %v, so whether it overlaps %s's %d-%d cannot be told", p, err, u.Name, lo, hi-1), "see docs/runbook.md#install-subid-overlap"})
			continue
		}
		found := false
		for _, s := range ids {
			switch {
			case mine(s.Owner) && s.Start == lo && s.Count == hi-lo:
				found = true
			case mine(s.Owner):
				errs = append(errs, Refusal{fmt.Sprintf("%s gives %s %d:%d, not %d:%d", p, u.Name, s.Start, s.Count, lo, hi-lo), "see docs/runbook.md#install-user-conflict"})
			case s.Start < hi && lo < s.Start+s.Count:
				errs = append(errs, Refusal{fmt.Sprintf("%s gives %s %d-%d, which overlaps %s's %d-%d: a container of one could hold the other's files", p, s.Owner, s.Start, s.Start+s.Count-1, u.Name, lo, hi-1), "see docs/runbook.md#install-subid-overlap"})
			}
		}
		add = add || !found
	}
	return add, errors.Join(errs...)
}
