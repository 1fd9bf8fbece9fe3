package layout

import (
	"path"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// TestEverySocketHasADir: each of wire's sockets sits alone in a
// directory of its own under run/, so that directory permissions decide
// who reaches it.
func TestEverySocketHasADir(t *testing.T) {
	seen := map[string]string{}
	for _, s := range wire.Sockets {
		e := SocketFor(s)
		if !strings.HasPrefix(e.Path, "run/") || path.Dir(e.Path) != "run" {
			t.Errorf("%s is in %s, want a directory of its own under run/", s.Name, e.Path)
		}
		if other, dup := seen[e.Path]; dup {
			t.Errorf("%s and %s share %s", s.Name, other, e.Path)
		}
		seen[e.Path] = s.Name
	}
}

func TestTableIsSound(t *testing.T) {
	paths := map[string]bool{}
	for _, e := range Table {
		switch {
		case paths[e.Path]:
			t.Errorf("%s is in the table twice", e.Path)
		case e.Path == "" || path.IsAbs(e.Path) || path.Clean(e.Path) != e.Path || strings.HasPrefix(e.Path, ".."):
			t.Errorf("%q is not a clean path inside the state directory", e.Path)
		case e.Kind == 0 || e.Writer == "" || e.Doc == "":
			t.Errorf("%s lacks its kind, writer or doc", e.Path)
		case (e.Kind == SocketDir) != (e.Socket != ""):
			t.Errorf("%s: a socket directory names its socket, and only it", e.Path)
		case e.Mode&0o022 != 0 || (e.Mode&0o004 != 0 && e != &UsersFile && e != &FormatFile && e != &Metrics):
			t.Errorf("%s: mode %s lets others write it, or read more than users.toml, the format file and the metrics", e.Path, modeText(e.Mode))
		case e.Owner == "" || (e.Kind == SocketDir) != (len(e.Accept) > 0) || e.Rests == "":
			t.Errorf("%s lacks its owner, what it rests on, or (a socket directory) whom it accepts", e.Path)
		}
		paths[e.Path] = true
	}
}
