package secret

import (
	"bytes"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

const token = "tok-5up3r-s3cr3t"

type holder struct {
	Name   string
	Token  Value
	hidden Value
	Ptr    *Value
	List   []Value
	Map    map[string]Value
}

func newHolder() holder {
	v := New([]byte(token))
	return holder{Name: "bot", Token: v, hidden: v, Ptr: &v, List: []Value{v}, Map: map[string]Value{"k": v}}
}

// leaks reports whether s shows the token in any obvious encoding.
func leaks(s string) bool {
	for _, enc := range []string{token, fmt.Sprintf("%x", token), fmt.Sprintf("%X", token), fmt.Sprint([]byte(token))} {
		if strings.Contains(s, enc) {
			return true
		}
	}
	return false
}

func TestFmtNeverShowsValue(t *testing.T) {
	v := New([]byte(token))
	h := newHolder()
	verbs := []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10.3s", "%-20v", "%T", "%p"}
	for _, verb := range verbs {
		for name, arg := range map[string]any{"value": v, "pointer": &v, "struct": h, "struct pointer": &h, "slice": []Value{v}, "map": map[string]Value{"a": v}} {
			got := fmt.Sprintf(verb, arg)
			if leaks(got) {
				t.Errorf("Sprintf(%q, %s) = %q leaks the secret", verb, name, got)
			}
		}
	}
	for name, got := range map[string]string{
		"Sprint":   fmt.Sprint(v),
		"Sprintln": fmt.Sprintln(v, h),
		"Errorf":   fmt.Errorf("wrap: %v", v).Error(),
		"String":   v.String(),
		"GoString": v.GoString(),
	} {
		if leaks(got) {
			t.Errorf("%s = %q leaks the secret", name, got)
		}
	}
	if got := fmt.Sprintf("%v", v); got != Redacted {
		t.Errorf("%%v = %q, want %q", got, Redacted)
	}
}

func TestSlogNeverShowsValue(t *testing.T) {
	v := New([]byte(token))
	h := newHolder()
	for name, mk := range map[string]func(*bytes.Buffer) slog.Handler{
		"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
		"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
	} {
		var buf bytes.Buffer
		log := slog.New(mk(&buf))
		log.Info("secret", "value", v, "ptr", &v, "holder", h, "holder_ptr", &h, "list", []Value{v})
		log.Info("group", slog.Group("g", slog.Any("v", v)))
		log.With("v", v).Info("with")
		if leaks(buf.String()) {
			t.Errorf("%s handler leaks the secret:\n%s", name, buf.String())
		}
		if !strings.Contains(buf.String(), Redacted) {
			t.Errorf("%s handler did not print %s:\n%s", name, Redacted, buf.String())
		}
	}
}

func TestEncodersRefuse(t *testing.T) {
	v := New([]byte(token))
	h := newHolder()
	if b, err := json.Marshal(v); !errors.Is(err, ErrEncode) || leaks(string(b)) {
		t.Errorf("json.Marshal(value) = %q, %v; want ErrEncode", b, err)
	}
	if b, err := json.Marshal(h); err == nil || leaks(string(b)) {
		t.Errorf("json.Marshal(holder) = %q, %v; want an error", b, err)
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(h); err == nil || leaks(buf.String()) {
		t.Errorf("gob encode = %v, want an error", err)
	}
	buf.Reset()
	if err := toml.NewEncoder(&buf).Encode(h); err == nil || leaks(buf.String()) {
		t.Errorf("toml encode = %v (%q), want an error", err, buf.String())
	}
	if _, err := v.MarshalText(); !errors.Is(err, ErrEncode) {
		t.Errorf("MarshalText = %v", err)
	}
	if _, err := v.MarshalBinary(); !errors.Is(err, ErrEncode) {
		t.Errorf("MarshalBinary = %v", err)
	}
}

func TestRevealAndEqual(t *testing.T) {
	src := []byte(token)
	v := New(src)
	src[0] = 'X'
	if v.Reveal() != token {
		t.Errorf("Reveal = %q: New must copy its input", v.Reveal())
	}
	if !v.Equal(New([]byte(token))) || v.Equal(New([]byte(token+"x"))) || v.Equal(Value{}) {
		t.Error("Equal is wrong")
	}
	if !(Value{}).IsZero() || v.IsZero() || (Value{}).Reveal() != "" {
		t.Error("zero value is wrong")
	}
}

func TestParseRef(t *testing.T) {
	for _, tt := range []struct {
		in, want string
		ok       bool
	}{
		{"mattermost-token", "credential:mattermost-token", true},
		{"credential:bot", "credential:bot", true},
		{"env:BOX_TOKEN", "env:BOX_TOKEN", true},
		{"file:/etc/boxmaker/token", "file:/etc/boxmaker/token", true},
		{"credential:../etc/shadow", "", false},
		{"credential:a/b", "", false},
		{"credential:", "", false},
		{"..", "", false},
		{"env:", "", false},
		{"env:A=B", "", false},
		{"file:relative/token", "", false},
		{"vault:x", "", false},
	} {
		r, err := ParseRef(tt.in)
		if (err == nil) != tt.ok || (tt.ok && r.String() != tt.want) {
			t.Errorf("ParseRef(%q) = %v, %v; want %q ok=%v", tt.in, r, err, tt.want, tt.ok)
		}
	}
}

type logCapture struct {
	bytes.Buffer
}

func storeWith(t *testing.T, credDir string) (*Store, *logCapture) {
	var c logCapture
	return &Store{credDir: credDir, log: slog.New(slog.NewTextHandler(&c, nil))}, &c
}

func mustRef(t *testing.T, s string) Ref {
	t.Helper()
	r, err := ParseRef(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCredentialBackend(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "bot"), []byte(token+"\n"), 0o400)
	s, _ := storeWith(t, dir)
	v, err := s.Load(mustRef(t, "bot"))
	if err != nil || v.Reveal() != token {
		t.Fatalf("Load(credential) = %v, %v", v, err)
	}
	if _, err := s.Load(mustRef(t, "absent")); err == nil || !strings.Contains(err.Error(), "see docs/runbook.md#secret-missing") {
		t.Errorf("Load(absent credential) = %v", err)
	}
	unset, _ := storeWith(t, "")
	if _, err := unset.Load(mustRef(t, "bot")); err == nil || !strings.Contains(err.Error(), "CREDENTIALS_DIRECTORY is not set") {
		t.Errorf("Load without CREDENTIALS_DIRECTORY = %v", err)
	}
}

func TestEnvBackend(t *testing.T) {
	t.Setenv("BOXMAKER_TEST_TOKEN", token)
	s, _ := storeWith(t, "")
	v, err := s.Load(mustRef(t, "env:BOXMAKER_TEST_TOKEN"))
	if err != nil || v.Reveal() != token {
		t.Fatalf("Load(env) = %v, %v", v, err)
	}
	if _, ok := os.LookupEnv("BOXMAKER_TEST_TOKEN"); ok {
		t.Error("the variable is still in the environment; children would inherit it")
	}
	// brokerd loads a tool's secret for every call: the Store keeps what
	// it took out of the environment.
	if again, err := s.Load(mustRef(t, "env:BOXMAKER_TEST_TOKEN")); err != nil || again.Reveal() != token {
		t.Errorf("a second Load(env) = %v, %v; want the same secret", again, err)
	}
	other, _ := storeWith(t, "")
	if _, err := other.Load(mustRef(t, "env:BOXMAKER_TEST_TOKEN")); err == nil {
		t.Error("Load(unset env) on a new Store succeeded")
	}
	t.Setenv("BOXMAKER_EMPTY", "")
	if _, err := s.Load(mustRef(t, "env:BOXMAKER_EMPTY")); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("Load(empty env) = %v", err)
	}
}

func TestFileBackend(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode os.FileMode, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	good := write("good", 0o600, token+"\r\n")
	s, logs := storeWith(t, "")
	v, err := s.Load(mustRef(t, "file:"+good))
	if err != nil || v.Reveal() != token {
		t.Fatalf("Load(file) = %q, %v", v.Reveal(), err)
	}
	if !strings.Contains(logs.String(), "plaintext file") || leaks(logs.String()) {
		t.Errorf("file secret warning = %q", logs.String())
	}
	link := filepath.Join(dir, "link")
	os.Symlink(good, link)
	cases := map[string]struct{ path, want string }{
		"group readable": {write("g", 0o640, token), "mode 0640"},
		"world readable": {write("w", 0o604, token), "mode 0604"},
		"group writable": {write("gw", 0o620, token), "mode 0620"},
		"symlink":        {link, "too many levels of symbolic links"},
		"directory":      {dir, "not a regular file"},
		"empty":          {write("e", 0o600, "\n"), "empty"},
		"too large":      {write("big", 0o600, strings.Repeat("a", MaxSize+1)), "larger than"},
		"missing":        {filepath.Join(dir, "nope"), "no such file"},
	}
	if os.Geteuid() == 0 {
		other := write("other", 0o600, token)
		os.Chown(other, 65534, 65534)
		cases["not owned"] = struct{ path, want string }{other, "not owned by this user"}
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := s.Load(mustRef(t, "file:"+c.path))
			if err == nil || !strings.Contains(err.Error(), c.want) || leaks(err.Error()) {
				t.Errorf("Load(%s) = %v, want %q", c.path, err, c.want)
			}
		})
	}
}

// TestParseRefNeverEchoes: a malformed ref is often the secret pasted in
// its place; no error quotes any of it.
func TestParseRefNeverEchoes(t *testing.T) {
	for _, s := range []string{"file:k3j9x8c7v6b5n4m3q2w1e0r9ty", "k3j9x8c7v6b5n4m3q2w1e0r9ty/x", "env:k3j9x8c7v6b5n4m3q2w1e0r9ty=", "k3j9x8c7v6b5n4m3:q2w1e0r9ty"} {
		_, err := ParseRef(s)
		if err == nil {
			t.Fatalf("ParseRef(%q) accepted", s)
		}
		if strings.Contains(err.Error(), "k3j9x8c7") || strings.Contains(err.Error(), "q2w1e0r9ty") {
			t.Errorf("ParseRef error echoes the text: %v", err)
		}
	}
}
