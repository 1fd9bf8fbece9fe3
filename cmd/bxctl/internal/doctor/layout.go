package doctor

import (
	"fmt"
	"io/fs"
	"os"
	"strings"

	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// layout checks the state directory against package layout's table, as
// every daemon checks its own entries at start (layout.Verify): each
// entry's kind, mode, owner and group under the role ids of
// config/users.toml (one user for every role when it is absent), no
// links, nothing others can write. This is the one place doctor reads
// the table.
func (a *auditor) layout(state string) {
	u, err := layout.LoadUsers(state)
	if err != nil {
		a.add("doctor-layout", Problem, "%v", err)
		return
	}
	var lines []string
	for _, p := range layout.Verify(state, u) {
		lines = append(lines, p.Error())
	}
	// Verify leaves a socket to its listener; a socket directory holding
	// something else would hand a role's clients a file.
	for _, e := range layout.Table {
		if e.Kind != layout.SocketDir {
			continue
		}
		if fi, err := os.Lstat(e.SocketIn(state)); err == nil && fi.Mode().Type() != fs.ModeSocket {
			lines = append(lines, fmt.Sprintf("%s/%s is a %s, not a socket", e.Path, e.Socket, typeName(fi.Mode())))
		}
	}
	if len(lines) > 0 {
		a.add("doctor-layout", Problem, "%s", strings.Join(lines, "; "))
		return
	}
	mode := "one user per role (config/users.toml)"
	if u.Single() {
		mode = "one user for every role"
	}
	a.add("doctor-layout", OK, "the state directory matches the table's %d entries, %s", len(layout.Table), mode)
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
