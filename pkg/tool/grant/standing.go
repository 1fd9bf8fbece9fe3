package grant

import (
	"errors"
	"fmt"

	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// A standing grant (standing = true) is the owner's standing approval of
// one exact call target, written by `bxctl grants apply` from a grant
// proposal (an `!approve ID CODE always`, or `bxctl grants suggest`), or
// by hand. It is narrow by construction: read_file of exactly one file
// (matched by equality, never a file under it) or http_fetch of exactly
// one host; mode auto; nothing else. Where it applies it turns an ask
// into auto (brokerd's policy rule 6); a deny grant still wins, and the
// ask grant's class and flags still label the result.

// Standing reports whether the grant is a standing approval.
func (g Grant) Standing() bool { return g.standing }

func (g *Grant) parseStanding(s Spec) error {
	if s.Standing == nil || !*s.Standing {
		return nil
	}
	switch {
	case s.Tool != toolset.ReadFile && s.Tool != toolset.HTTPFetch:
		return fmt.Errorf("standing = true is for read_file and http_fetch only, not %s: a standing approval names one file or one host", s.Tool)
	case s.Mode != "auto":
		return errors.New("a standing grant's mode is auto: it is an approval given once")
	case len(s.Paths)+len(s.Hosts) != 1:
		return errors.New("a standing grant names exactly one path (a file) or one host")
	}
	g.standing = true
	return nil
}
