package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/gatewayd"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// TestReadOutbox: gatewayd reads a posted file only as a regular file
// under the session's outbox directory, by an id of the right shape, and
// never through a link.
func TestReadOutbox(t *testing.T) {
	state := t.TempDir()
	g := &Gateway{cfg: gatewayd.Config{StateDir: state}}
	dir := filepath.Join(layout.Outbox.In(state), "mm-x")
	require.NoError(t, os.MkdirAll(dir, 0o750))
	id := strings.Repeat("ab", 16)
	require.NoError(t, os.WriteFile(filepath.Join(dir, id), []byte("data"), 0o640))
	b, err := g.readOutbox("mm-x", wire.PostedFile{ID: id, Name: "r.csv"})
	require.NoError(t, err)
	require.Equal(t, "data", string(b))
	link := strings.Repeat("cd", 16)
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(dir, link)))
	for _, tt := range []struct {
		session string
		f       wire.PostedFile
	}{
		{"mm-x", wire.PostedFile{ID: link, Name: "passwd"}},
		{"mm-x", wire.PostedFile{ID: "../../etc/passwd", Name: "x"}},
		{"../x", wire.PostedFile{ID: id, Name: "x"}},
		{"mm-x", wire.PostedFile{ID: id, Name: "a/b"}},
		{"mm-x", wire.PostedFile{ID: strings.Repeat("ef", 16), Name: "missing"}},
	} {
		if _, err := g.readOutbox(tt.session, tt.f); err == nil {
			t.Errorf("readOutbox(%q, %+v) read it", tt.session, tt.f)
		}
	}
}
