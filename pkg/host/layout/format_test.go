package layout

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseFormat(t *testing.T) {
	for _, c := range []struct {
		text string
		want int
		ok   bool
	}{
		{"1\n", 1, true}, {"0\n", 0, true}, {"42\n", 42, true},
		{"1", 0, false}, {"\n", 0, false}, {"01\n", 0, false}, {"-1\n", 0, false}, {"+1\n", 0, false},
		{" 1\n", 0, false}, {"1 \n", 0, false}, {"1\n\n", 0, false}, {"1\r\n", 0, false}, {"x\n", 0, false},
		{"1234567890\n", 0, false}, {"format = 1\n", 0, false},
	} {
		n, err := ParseFormat(c.text, "f")
		if (err == nil) != c.ok || n != c.want {
			t.Errorf("ParseFormat(%q) = %d, %v; want %d, ok %v", c.text, n, err, c.want, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "docs/runbook.md#state-format") {
			t.Errorf("ParseFormat(%q): %v lacks its runbook entry", c.text, err)
		}
	}
}

func FuzzParseFormat(f *testing.F) {
	f.Add("1\n")
	f.Add("01\n")
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseFormat(s, "f")
		if err == nil && FormatText(n) != s {
			t.Fatalf("ParseFormat(%q) = %d, which is written %q", s, n, FormatText(n))
		}
	})
}

// TestCheckFormat: no file is format 0 and runs; this build's format
// runs; a newer one is refused with the way back; one older than the
// oldest a build runs is refused with the way forward; a link, a file
// others can write and a garbled one are refused.
func TestCheckFormat(t *testing.T) {
	state := t.TempDir()
	if n, err := CheckFormat(state, "loopd"); n != 0 || err != nil {
		t.Fatalf("no format file: %d, %v; want 0, nil", n, err)
	}
	if err := WriteFormat(state, Format); err != nil {
		t.Fatal(err)
	}
	if n, err := CheckFormat(state, "loopd"); n != Format || err != nil {
		t.Fatalf("format %d: %d, %v", Format, n, err)
	}
	// One user runs every role (no users file): 0600, the table's mode
	// for it, as layout.Verify wants; a user per role: 0644.
	fi, _ := os.Stat(FormatFile.In(state))
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("WriteFormat made mode %04o in a single-user state, want 0600", fi.Mode().Perm())
	}
	multi := t.TempDir()
	os.MkdirAll(filepath.Dir(UsersFile.In(multi)), 0o700)
	if err := os.WriteFile(UsersFile.In(multi), []byte(DefaultUsers(ID{uint32(os.Getuid()), uint32(os.Getgid())}).Text()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFormat(multi, Format); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(FormatFile.In(multi)); fi.Mode().Perm() != 0o644 {
		t.Errorf("WriteFormat made mode %04o in a state with a user per role, want 0644", fi.Mode().Perm())
	}
	if err := WriteFormat(state, Format+1); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckFormat(state, "loopd"); err == nil || !strings.Contains(err.Error(), "newer than the") || !strings.Contains(err.Error(), "#state-newer") {
		t.Errorf("newer: %v", err)
	}
	if err := WriteFormat(state, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := checkFormat(state, "loopd", 5, 4); err == nil || !strings.Contains(err.Error(), "bxctl migrate") || !strings.Contains(err.Error(), "#state-older") {
		t.Errorf("older than the oldest: %v", err)
	}
	if n, err := checkFormat(state, "loopd", 5, 3); n != 3 || err != nil {
		t.Errorf("older, runnable as it is: %d, %v", n, err)
	}
	os.Chmod(FormatFile.In(state), 0o666)
	if _, err := CheckFormat(state, "loopd"); err == nil || !strings.Contains(err.Error(), "#layout-writable") {
		t.Errorf("writable by others: %v", err)
	}
	os.Remove(FormatFile.In(state))
	os.WriteFile(filepath.Join(state, "elsewhere"), []byte("1\n"), 0o644)
	os.Symlink("elsewhere", FormatFile.In(state))
	if _, err := CheckFormat(state, "loopd"); err == nil || !strings.Contains(err.Error(), "#layout-link") {
		t.Errorf("a link: %v", err)
	}
	os.Remove(FormatFile.In(state))
	os.WriteFile(FormatFile.In(state), []byte("one\n"), 0o644)
	if _, err := CheckFormat(state, "loopd"); err == nil || !strings.Contains(err.Error(), "#state-format") {
		t.Errorf("garbled: %v", err)
	}
}

func TestFresh(t *testing.T) {
	d := t.TempDir()
	for _, c := range []struct {
		path string
		want bool
	}{{filepath.Join(d, "missing"), true}, {d, true}} {
		if got, err := Fresh(c.path); got != c.want || err != nil {
			t.Errorf("Fresh(%s) = %v, %v", c.path, got, err)
		}
	}
	os.WriteFile(filepath.Join(d, "x"), nil, 0o600)
	if got, _ := Fresh(d); got {
		t.Errorf("a directory holding a file is fresh")
	}
}
