package audit

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkAppend is the cost of one fsynced record, with the head record
// kept as brokerd keeps it and without (the chain alone), so the price of
// the two head writes per record is one subtraction.
func BenchmarkAppend(b *testing.B) {
	for _, tt := range []struct {
		name string
		opts Options
	}{{"head", Options{}}, {"chain-only", Options{noHead: true}}} {
		b.Run(tt.name, func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "audit")
			if err := os.Mkdir(dir, 0o700); err != nil {
				b.Fatal(err)
			}
			w, err := Open(dir, tt.opts)
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			r := denied("s-1", NoGrant, "no grant allows http_fetch to example.com", nil)
			b.ResetTimer()
			for b.Loop() {
				if _, err := w.Append(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
