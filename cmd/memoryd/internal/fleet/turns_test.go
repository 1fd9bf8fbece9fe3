package fleet

import (
	"os"
	"path/filepath"
	"testing"

	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// TestReadTurnsStartsFromHead: fleet memory labels a turn of an epoch
// after 0 from its head's trust, as the index does (one reader, package
// sessionlog's): a compacted session that read untrusted content must
// not look clean to the gate check because its new epoch has no tool
// result of its own.
func TestReadTurnsStartsFromHead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s1")
	os.MkdirAll(dir, 0o750)
	log := `{"type":"head","turn":3,"epoch":1,"prev":0,"prev_hash":"00","taint":"secret","untrusted":true}
{"type":"summary","turn":3,"epoch":1,"text":"read a page","cache_n":0,"prompt_n":10,"predicted_n":5}
{"type":"user","turn":4,"text":"what tea?"}
{"type":"assistant","turn":4,"message":{"role":"assistant","content":"green"}}
{"type":"turn_end","turn":4}
`
	path := filepath.Join(dir, "1.jsonl")
	os.WriteFile(path, []byte(log), 0o640)
	turns, err := ReadTurns(path)
	if err != nil {
		t.Fatal(err)
	}
	want := State{Taint: dataclass.Secret, Untrusted: true}
	if len(turns) != 1 || turns[0].Labels != want || turns[0].Epoch != 1 || turns[0].Turn != 4 ||
		len(turns[0].Said) != 1 || turns[0].Said[0] != (Line{3, "what tea?"}) || turns[0].Reply == nil || *turns[0].Reply != (Line{4, "green"}) {
		t.Fatalf("ReadTurns = %+v, want turn 4 labelled %+v", turns, want)
	}
}
