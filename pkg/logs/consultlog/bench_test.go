package consultlog

import (
	"path/filepath"
	"testing"
)

// BenchmarkAppend is the cost of one fsynced consult-log line with its
// two head writes (a consult is one request and one response: twice
// this). A consult itself takes seconds to minutes.
func BenchmarkAppend(b *testing.B) {
	w, err := Open(filepath.Join(b.TempDir(), "consult"))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	r := request(`{"model":"m","messages":[{"role":"user","content":"why?"}],"temperature":0.6,"stream":true}`)
	for b.Loop() {
		if _, _, err := w.Request(r); err != nil {
			b.Fatal(err)
		}
	}
}
