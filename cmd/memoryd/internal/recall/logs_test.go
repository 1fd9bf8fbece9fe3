package recall

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
)

// memoryd reads sessions/ without following symlinks and only regular
// files: a link planted there must not lead it to index a file outside.
func TestLogsNoSymlinks(t *testing.T) {
	dir := t.TempDir()
	good := `{"type":"user","turn":1,"text":"outside secret"}` + "\n" + `{"type":"turn_end","turn":1}`
	real := writeLog(t, dir, "s1", good)
	if turns, err := ReadLog(real); err != nil || len(turns) != 1 {
		t.Fatalf("ReadLog(regular) = %v, %v", turns, err)
	}
	outside := filepath.Join(t.TempDir(), "elsewhere.jsonl")
	os.WriteFile(outside, []byte(good+"\n"), 0o600)
	sessions := filepath.Join(dir, "sessions")
	os.MkdirAll(filepath.Join(sessions, "s2"), 0o700)
	os.Symlink(outside, filepath.Join(sessions, "s2", "0.jsonl"))   // a linked log
	os.Symlink(filepath.Dir(real), filepath.Join(sessions, "s3"))   // a linked session directory
	syscall.Mkfifo(filepath.Join(sessions, "s2", "1.jsonl"), 0o600) // a FIFO would block a reader
	files, err := sessionlog.Files(sessions)
	if err != nil || len(files) != 1 || files[0] != real {
		t.Errorf("sessionlog.Files = %v, %v; want only the regular log", files, err)
	}
	for _, p := range []string{filepath.Join(sessions, "s2", "0.jsonl"), filepath.Join(sessions, "s3", "0.jsonl"), filepath.Join(sessions, "s2", "1.jsonl")} {
		if turns, err := ReadLog(p); err == nil || len(turns) != 0 {
			t.Errorf("ReadLog(%s) = %v, %v; want refused", strings.TrimPrefix(p, dir), turns, err)
		}
	}
}
