package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"wntrmute.dev/boxmaker/pkg/layout"
)

// layout checks every entry of package layout's table as it is on disk:
// its kind, its mode exactly as the table says, and that neither it nor
// the socket in a socket directory is a symbolic link (a link could
// point a role at another's files). An entry bxctl up makes must exist;
// the others are made by their writer on first use, so their absence is
// fine. This is the one place doctor reads the table: a column the table
// gains (the owner, group and uids of issue 14) is checked here.
func (a *auditor) layout(state string) {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if fi, err := os.Lstat(state); err == nil && fi.Mode().Perm()&0o022 != 0 {
		bad("%s has mode %04o: others could replace what is in it", state, fi.Mode().Perm())
	}
	checked := 0
	for _, e := range layout.Table {
		p := e.In(state)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			if e.Up {
				bad("%s is missing (bxctl up makes it)", e.Path)
			}
			continue
		}
		if err != nil {
			bad("%s: %v", e.Path, err)
			continue
		}
		checked++
		want := fs.ModeDir
		if e.Kind == layout.File {
			want = 0
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			bad("%s is a symbolic link", e.Path)
			continue
		case fi.Mode().Type() != want:
			bad("%s is a %s, the table says %s", e.Path, typeName(fi.Mode()), typeName(want))
			continue
		case fi.Mode().Perm() != e.Mode:
			bad("%s has mode %04o, the table says %04o", e.Path, fi.Mode().Perm(), e.Mode)
		}
		if e.Kind == layout.SocketDir {
			s, err := os.Lstat(e.SocketIn(state))
			switch {
			case errors.Is(err, fs.ErrNotExist): // the role is not running
			case err != nil:
				bad("%s/%s: %v", e.Path, e.Socket, err)
			case s.Mode().Type() != fs.ModeSocket:
				bad("%s/%s is a %s, not a socket", e.Path, e.Socket, typeName(s.Mode()))
			}
		}
	}
	if len(problems) > 0 {
		a.add("doctor-layout", Problem, "%s", strings.Join(problems, "; "))
		return
	}
	a.add("doctor-layout", OK, "%d of the table's %d entries present, each of its kind and mode, none a link", checked, len(layout.Table))
}

func typeName(m fs.FileMode) string {
	switch m.Type() {
	case fs.ModeDir:
		return "directory"
	case fs.ModeSymlink:
		return "symbolic link"
	case fs.ModeSocket:
		return "socket"
	case fs.ModeNamedPipe:
		return "named pipe"
	case 0:
		return "file"
	}
	return "special file"
}
