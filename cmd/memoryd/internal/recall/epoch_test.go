package recall

import (
	"os"
	"path/filepath"
	"testing"

	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// TestReadLogStartsFromHead: an epoch after 0 starts from its head's
// trust, not the floor: a compacted session that read untrusted content
// yields memory-tainted turns of its head's class, with no tool result
// of its own.
func TestReadLogStartsFromHead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s1")
	os.MkdirAll(dir, 0o750)
	log := `{"type":"head","turn":3,"epoch":1,"prev":0,"prev_hash":"00","taint":"secret","untrusted":true}
{"type":"summary","turn":3,"epoch":1,"text":"read a page","cache_n":0,"prompt_n":10,"predicted_n":5}
{"type":"user","turn":4,"text":"what tea?"}
{"type":"turn_end","turn":4}
`
	path := filepath.Join(dir, "1.jsonl")
	os.WriteFile(path, []byte(log), 0o640)
	turns, err := ReadLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 1 || !turns[0].Untrusted || turns[0].Class != dataclass.Secret || turns[0].Epoch != 1 ||
		len(turns[0].Docs) != 1 || turns[0].Docs[0].Source != SourceTainted {
		t.Fatalf("ReadLog = %+v, want turn 4 untrusted, secret, memory-tainted", turns)
	}
}
