package jsonl

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

type rec struct {
	N    int    `json:"n"`
	Text string `json:"text"`
}

func TestAppendAndScan(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log.jsonl")
	w, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"plain", "new\nline", "<tag>&amp;", "\u202e bidi", ""}
	for i, s := range texts {
		n, err := w.Append(rec{N: i, Text: s})
		if err != nil || n != i+1 {
			t.Fatalf("Append #%d = %d, %v", i, n, err)
		}
	}
	w.Close()
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("log mode = %v, want 0600", fi.Mode())
	}
	var got []rec
	err = Scan(p, DefaultMaxLine, func(n int, b []byte) error {
		var r rec
		if err := strict.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range texts {
		if got[i].Text != s || got[i].N != i {
			t.Errorf("record %d = %+v, want %q", i, got[i], s)
		}
	}
	b, _ := os.ReadFile(p)
	if strings.Count(string(b), "\n") != len(texts) || !strings.Contains(string(b), `"<tag>&amp;"`) {
		t.Errorf("file is not one unescaped record per line:\n%s", b)
	}
	w2, err := Open(p)
	if err != nil || w2.Lines() != len(texts) {
		t.Fatalf("reopen: lines = %d, %v", w2.Lines(), err)
	}
	if n, err := w2.Append(rec{N: 9}); err != nil || n != len(texts)+1 {
		t.Errorf("Append after reopen = %d, %v", n, err)
	}
	w2.Close()
}

func TestTornLastLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log.jsonl")
	os.WriteFile(p, []byte("{\"n\":1,\"text\":\"a\"}\n{\"n\":2,\"text\":\"b\"}\n{\"n\":3,\"te"), 0o600)
	before, _ := os.ReadFile(p)
	_, err := Open(p)
	var te *TornError
	if !errors.As(err, &te) || te.Line != 3 || te.Offset != 38 {
		t.Fatalf("Open(torn) = %v, want TornError at line 3, byte 38", err)
	}
	if !strings.Contains(err.Error(), "see docs/runbook.md#torn-log") {
		t.Errorf("torn error has no runbook pointer: %v", err)
	}
	if after, _ := os.ReadFile(p); string(after) != string(before) {
		t.Error("Open changed a torn file")
	}
	var lines []int
	err = Scan(p, DefaultMaxLine, func(n int, _ []byte) error { lines = append(lines, n); return nil })
	if !errors.As(err, &te) || te.Line != 3 || len(lines) != 2 {
		t.Errorf("Scan(torn) = %v after lines %v, want both complete lines then TornError", err, lines)
	}
}

func TestEmptyAndLongLines(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.jsonl")
	os.WriteFile(empty, nil, 0o600)
	if w, err := Open(empty); err != nil || w.Lines() != 0 {
		t.Errorf("Open(empty) = %v", err)
	}
	long := filepath.Join(dir, "long.jsonl")
	os.WriteFile(long, []byte("{}\n"+strings.Repeat("x", 100)+"\n"), 0o600)
	err := Scan(long, 50, func(int, []byte) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "long.jsonl:2: line longer than 50") {
		t.Errorf("Scan(long line) = %v", err)
	}
}

func TestBrokenAfterFailedWrite(t *testing.T) {
	w, err := Open(filepath.Join(t.TempDir(), "log.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	w.f.Close() // the disk goes away under the writer
	if _, err := w.Append(rec{N: 1}); err == nil || !strings.Contains(err.Error(), "see docs/runbook.md#log-write-failed") {
		t.Fatalf("Append on a failed file = %v", err)
	}
	if _, err := w.Append(rec{N: 2}); !errors.Is(err, ErrBroken) {
		t.Errorf("Append after a failure = %v, want ErrBroken", err)
	}
}

func TestUnencodableRefused(t *testing.T) {
	w, err := Open(filepath.Join(t.TempDir(), "log.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(map[string]any{"f": func() {}}); err == nil {
		t.Error("Append of an unencodable value succeeded")
	}
	if w.Lines() != 0 {
		t.Error("a refused record was counted")
	}
	if _, err := w.Append(rec{N: 1}); err != nil {
		t.Errorf("an encoding refusal broke the writer: %v", err)
	}
}

func TestConcurrentAppends(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log.jsonl")
	w, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 10 {
				if _, err := w.Append(rec{N: i*10 + j, Text: strings.Repeat("y", 5000)}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	seen := map[int]bool{}
	err = Scan(p, DefaultMaxLine, func(_ int, b []byte) error {
		var r rec
		if err := strict.Unmarshal(b, &r); err != nil {
			return err
		}
		seen[r.N] = true
		return nil
	})
	if err != nil || len(seen) != 200 {
		t.Errorf("after concurrent appends: %d distinct records, %v", len(seen), err)
	}
}

func TestAppendEncoded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log.jsonl")
	w, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := w.AppendEncoded([]byte(`{"type":"x","n":1}`)); err != nil || n != 1 {
		t.Fatalf("AppendEncoded = %d, %v", n, err)
	}
	for _, bad := range []string{`{"a":1`, "{\"a\":\n1}", ``, `{} {}`} {
		if _, err := w.AppendEncoded([]byte(bad)); err == nil {
			t.Errorf("AppendEncoded(%q) succeeded", bad)
		}
	}
	if b, _ := os.ReadFile(p); string(b) != "{\"type\":\"x\",\"n\":1}\n" {
		t.Errorf("file = %q", b)
	}
}

func TestEndTornLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log.jsonl")
	torn := []byte(`{"n":2,"te`)
	os.WriteFile(p, append([]byte("{\"n\":1}\n"), torn...), 0o600)
	sum := sha256.Sum256(torn)
	if err := EndTornLine(p, int64(len(torn)), sha256.Sum256([]byte("other"))); !errors.Is(err, ErrChanged) {
		t.Errorf("EndTornLine with the wrong hash = %v, want ErrChanged", err)
	}
	if err := EndTornLine(p, int64(len(torn))+2, sum); !errors.Is(err, ErrChanged) {
		t.Errorf("EndTornLine over a newline = %v, want ErrChanged", err)
	}
	if b, _ := os.ReadFile(p); bytes.HasSuffix(b, []byte("\n")) {
		t.Fatal("a refused EndTornLine wrote")
	}
	if err := EndTornLine(p, int64(len(torn)), sum); err != nil {
		t.Fatal(err)
	}
	w, err := Open(p)
	if err != nil || w.Lines() != 2 {
		t.Fatalf("Open after EndTornLine = %v (lines %d)", err, w.Lines())
	}
}
