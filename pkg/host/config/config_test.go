package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

type slots struct {
	Main       int `toml:"main"`
	Background int `toml:"background"`
}

type grant struct {
	Tool  string          `toml:"tool"`
	Paths []string        `toml:"paths"`
	Class dataclass.Class `toml:"class"`
}

type role struct {
	Socket    string            `toml:"socket"`
	TimeoutMS int64             `toml:"timeout_ms"`
	Slots     slots             `toml:"slots"`
	Grants    []grant           `toml:"grant"`
	Env       map[string]string `toml:"env"`
}

func TestDecodeAccepts(t *testing.T) {
	in := `
socket = "/run/x.sock"
timeout_ms = 30000
[slots]
main = 0
background = 1
[env]
Any_Case_Key = "map keys are data, not fields"
[[grant]]
tool = "read_file"
paths = ["/home/owner/notes"]
class = "secret"
`
	var got role
	if err := Decode([]byte(in), "role.toml", &got); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	want := role{Socket: "/run/x.sock", TimeoutMS: 30000, Slots: slots{0, 1},
		Grants: []grant{{Tool: "read_file", Paths: []string{"/home/owner/notes"}, Class: dataclass.Secret}},
		Env:    map[string]string{"Any_Case_Key": "map keys are data, not fields"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Decode = %+v, want %+v", got, want)
	}
}

func TestDecodeRefuses(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"unknown key", "socket = \"a\"\nsockett = \"b\"", "unknown key sockett"},
		{"unknown nested key", "[slots]\nmain = 1\nspare = 2", "unknown key slots.spare"},
		{"unknown table", "[slotz]\nmain = 1", "unknown key slotz"},
		{"case differs", "Socket = \"a\"", "case differs"},
		{"case differs nested", "[slots]\nMain = 1", "case differs"},
		{"case differs table", "[Slots]\nmain = 1", "case differs"},
		{"case differs in array table", "[[grant]]\nTool = \"x\"", "case differs"},
		{"duplicate key", "socket = \"a\"\nsocket = \"b\"", "line 2"},
		{"duplicate table", "[slots]\nmain = 1\n[slots]\nmain = 2", "line 3"},
		{"type mismatch", "timeout_ms = \"30s\"", "timeout_ms"},
		{"float for int", "timeout_ms = 1.5", "timeout_ms"},
		{"bad class", "[[grant]]\nclass = \"Secret\"", "not public, private or secret"},
		{"syntax", "socket = ", "line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := role{Socket: "untouched"}
			err := Decode([]byte(tt.in), "role.toml", &got)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "role.toml") {
				t.Errorf("Decode(%q) = %v, want an error naming role.toml and containing %q", tt.in, err, tt.want)
			}
			if got.Socket != "untouched" || got.TimeoutMS != 0 {
				t.Errorf("Decode(%q) changed v on error: %+v", tt.in, got)
			}
		})
	}
}

func TestFloatFieldRefused(t *testing.T) {
	var v struct {
		Temp float64 `toml:"temperature"`
	}
	if err := Decode([]byte("temperature = 0.6"), "x.toml", &v); err == nil || !strings.Contains(err.Error(), "float") {
		t.Errorf("Decode into a float field = %v, want refusal", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r.toml")
	os.WriteFile(p, []byte("socket = \"s\""), 0o600)
	var r role
	if err := Load(p, &r); err != nil || r.Socket != "s" {
		t.Errorf("Load = %+v, %v", r, err)
	}
	big := filepath.Join(dir, "big.toml")
	os.WriteFile(big, []byte("socket = \""+strings.Repeat("a", MaxSize)+"\""), 0o600)
	if err := Load(big, &r); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Load(big) = %v", err)
	}
	if err := Load(filepath.Join(dir, "missing.toml"), &r); err == nil {
		t.Error("Load(missing) succeeded")
	}
}
