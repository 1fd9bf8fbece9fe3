package audit

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzParseLine checks the line decoder on arbitrary input: it never
// panics, and whatever it accepts is canonical (it re-encodes to the same
// bytes, which is what makes one hash per record) and accepted again.
// The seed corpus (testdata/fuzz/FuzzParseLine) holds every golden record
// and one input per refusal the decoder documents.
func FuzzParseLine(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseLine(data)
		if err != nil {
			if r != nil {
				t.Fatalf("ParseLine refused %q but returned %+v", data, r)
			}
			return
		}
		out, err := records.Encode(r)
		if err != nil || !bytes.Equal(out, data) {
			t.Fatalf("ParseLine accepted %q, which encodes as %q (%v)", data, out, err)
		}
		again, err := ParseLine(out)
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("re-parse of %q = %+v, %v", out, again, err)
		}
		if h := r.Head(); h.Seq < 1 || !IsHash(h.Prev) || checkTime(h.Time) != nil {
			t.Fatalf("accepted header %+v", h)
		}
	})
}

// FuzzVerify appends arbitrary bytes to the fixture's latest file and
// checks the verifier against the writer: Verify never panics and is
// deterministic; an intact log stays intact after Open and an append; a
// damaged last line is recovered by Open and the log is then intact; any
// other problem makes Open refuse, and once AcceptBreak has recorded it,
// Open succeeds and the log verifies. That is: the writer never breaks
// its own chain, and every state has a way out.
func FuzzVerify(f *testing.F) {
	fixture := map[string][]byte{}
	for _, name := range []string{day1, day2} {
		b, err := os.ReadFile(filepath.Join("testdata/chain", name))
		if err != nil {
			f.Fatal(err)
		}
		fixture[name] = b
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		for name, b := range fixture {
			if name == day2 {
				b = append(bytes.Clone(b), data...)
			}
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		r := Verify(dir)
		if again := Verify(dir); !reflect.DeepEqual(r, again) {
			t.Fatalf("Verify is not deterministic: %+v then %+v", r, again)
		}
		opts := noon()
		switch p := r.Problem; {
		case p == nil:
		case p.Unreadable:
			t.Fatalf("Verify of a readable directory: %v", p)
		case p.Recoverable:
			w, err := Open(dir, opts)
			if err != nil {
				t.Fatalf("Open with a damaged last line (%v): %v", p, err)
			}
			if w.Recovered() == nil {
				t.Fatalf("Open recovered nothing for %v", p)
			}
			w.Close()
		default:
			if w, err := Open(dir, opts); err == nil {
				w.Close()
				t.Fatalf("Open succeeded on a broken log (%v)", p)
			}
			ab, err := AcceptBreak(dir, opts)
			if err != nil || ab == nil {
				t.Fatalf("AcceptBreak(%v) = %+v, %v", p, ab, err)
			}
		}
		w, err := Open(dir, opts)
		if err != nil {
			t.Fatalf("Open after handling %v: %v", r.Problem, err)
		}
		if _, err := w.Append(allowed("s-f", "read_file")); err != nil {
			t.Fatalf("Append: %v", err)
		}
		w.Close()
		if after := Verify(dir); !after.OK() {
			t.Fatalf("the writer broke the chain: first %v, now %v", r.Problem, after.Problem)
		}
	})
}
