package consultlog

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var hashA = strings.Repeat("a", 64)

func request(body string) Request {
	return Request{Session: "s1", Decision: 1, DecisionSHA256: hashA, Grant: GrantRef{"c", hashA}, Model: "m", URL: "https://api.example.com/v1/chat/completions", Body: body}
}

func fill(t *testing.T, dir string) {
	t.Helper()
	w, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i, body := range []string{`{"a":1}`, `{"b":"<&>"}`} {
		seq, _, err := w.Request(request(body))
		if err != nil || seq < int64(2*i+1) {
			t.Fatalf("Request = %d, %v", seq, err)
		}
		if _, err := w.Response(Response{Request: seq, Status: 200, Content: "answer", Reasoning: "why", StreamSHA256: hashA}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Response(Response{Request: 9, Status: 200}); err == nil {
		t.Error("a response to no request was written")
	}
}

// TestChain: the log verifies as written, reopens where it ended, and
// keeps bodies byte for byte.
func TestChain(t *testing.T) {
	dir := t.TempDir()
	fill(t, dir)
	fill(t, dir) // reopened: the chain goes on
	rep := Verify(dir, "")
	if !rep.OK() || rep.Lines != 8 || rep.Requests != 4 || rep.Responses != 4 {
		t.Fatalf("Verify = %+v %v", rep, rep.Problem)
	}
	b, _ := os.ReadFile(filepath.Join(dir, FileName))
	if !bytes.Contains(b, []byte(`"body":"{\"b\":\"<&>\"}"`)) {
		t.Errorf("body not kept byte for byte:\n%s", b)
	}
}

// TestTamperNamed: a changed byte, a removed line or a torn end is named
// by its line, and Open refuses the log.
func TestTamperNamed(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func([]string) []string
		line int
	}{
		{"changed body", func(ls []string) []string { ls[2] = strings.Replace(ls[2], `\"b\"`, `\"c\"`, 1); return ls }, 3},
		{"changed answer", func(ls []string) []string { ls[1] = strings.Replace(ls[1], "answer", "answen", 1); return ls }, 2},
		{"removed line", func(ls []string) []string { return append(ls[:1], ls[2:]...) }, 2},
		{"torn end", func(ls []string) []string { ls[len(ls)-1] = `{"type":"req`; return ls }, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			fill(t, dir)
			path := filepath.Join(dir, FileName)
			b, _ := os.ReadFile(path)
			ls := tt.edit(strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"))
			out := strings.Join(ls, "\n")
			if tt.name != "torn end" {
				out += "\n"
			}
			os.WriteFile(path, []byte(out), 0o600)
			rep := Verify(dir, "")
			if rep.OK() || rep.Problem.Line != tt.line {
				t.Fatalf("Verify = %v, want line %d named", rep.Problem, tt.line)
			}
			if _, err := Open(dir); err == nil {
				t.Error("Open accepted a damaged log")
			}
		})
	}
}

// FuzzParseLine: an accepted line re-encodes to itself.
func FuzzParseLine(f *testing.F) {
	f.Add([]byte(`{"type":"request","seq":1,"time":"2026-12-01T00:00:00.000000000Z","prev":"` + strings.Repeat("0", 64) + `","session":"s","decision":1,"decision_sha256":"` + hashA + `","grant":{"id":"c","sha256":"` + hashA + `"},"model":"m","url":"u","body":"b"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := ParseLine(line)
		if err != nil {
			return
		}
		again, err := records.Encode(r)
		if err != nil || !bytes.Equal(again, line) {
			t.Fatalf("accepted %q, re-encodes as %q (%v)", line, again, err)
		}
	})
}
