package audit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecords: every record of the fixture chain, in order, with the
// hash the next line's prev names; a damaged line is passed over.
func TestRecords(t *testing.T) {
	dir := chainDir(t)
	var seqs []int64
	var hashes []string
	var prevs []string
	err := Records(dir, func(r Record, hash string) error {
		seqs = append(seqs, r.Head().Seq)
		hashes = append(hashes, hash)
		prevs = append(prevs, r.Head().Prev)
		return nil
	})
	if err != nil || len(seqs) != 11 {
		t.Fatalf("Records = %v, %d records; want the fixture's 11", err, len(seqs))
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != int64(i+1) || prevs[i] != hashes[i-1] {
			t.Errorf("record %d: seq %d prev %s, want seq %d prev %s", i, seqs[i], prevs[i], i+1, hashes[i-1])
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	f, err := os.OpenFile(files[len(files)-1], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(strings.Repeat("x", 10) + "\n")
	f.Close()
	n := 0
	if err := Records(dir, func(Record, string) error { n++; return nil }); err != nil || n != 11 {
		t.Errorf("Records over a damaged line = %v, %d records", err, n)
	}
}
