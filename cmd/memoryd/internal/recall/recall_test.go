package recall

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

func openIndex(t testing.TB, dir string, max dataclass.Class) *Index {
	t.Helper()
	x, err := Open(filepath.Join(dir, "recall.db"), max, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

func writeLog(t *testing.T, dir, session string, lines ...string) string {
	t.Helper()
	p := filepath.Join(dir, "sessions", session, "0.jsonl")
	os.MkdirAll(filepath.Dir(p), 0o700)
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestQueryIsQuoted(t *testing.T) {
	for in, want := range map[string]string{
		`tea`:                            `"tea"`,
		`owner's "tea" OR x NEAR(a b) *`: `"owner" OR "s" OR "tea" OR "x" OR "NEAR" OR "b"`,
		`what is the`:                    `"what" OR "is" OR "the"`,
		`'); DROP TABLE docs; --`:        `"DROP" OR "TABLE" OR "docs"`,
		`***`:                            ``,
		`café 日本`:                        `"café" OR "日本"`,
	} {
		if got := match(in); got != want {
			t.Errorf("match(%q) = %q, want %q", in, got, want)
		}
	}
	x := openIndex(t, t.TempDir(), dataclass.Private)
	for _, q := range []string{`"`, `a AND`, `NEAR(`, `col:x`, `^x`, `'); DROP TABLE docs; --`} {
		if _, err := x.Recall(context.Background(), q, 3, ""); err != nil {
			t.Errorf("Recall(%q) = %v, want no FTS5 syntax error", q, err)
		}
	}
}

func TestReadLogStrict(t *testing.T) {
	dir := t.TempDir()
	p := writeLog(t, dir, "s1", `{"type":"user","turn":1,"text":"hi"}`, `{"type":"user","turn":1,"text":"hi","extra":1}`)
	if _, err := ReadLog(p); err == nil || !strings.Contains(err.Error(), "0.jsonl:2") {
		t.Errorf("ReadLog(unknown field) = %v", err)
	}
	p = writeLog(t, dir, "s2", `{"type":"summary","turn":1}`)
	if _, err := ReadLog(p); err == nil {
		t.Error("ReadLog(unknown record type) = nil")
	}
	p = writeLog(t, dir, "s3", `{"type":"tool_result","turn":1,"call_id":"c","tool":"t","status":"ok","content":"","truncated":false,"class":"private","untrusted":false}`+"\n"+`{"type":"user"`)
	if _, err := ReadLog(p); err == nil {
		t.Error("ReadLog(torn) = nil")
	}
}

func TestClassLimit(t *testing.T) {
	dir := t.TempDir()
	p := writeLog(t, dir, "s1",
		`{"type":"user","turn":1,"text":"private matter"}`, `{"type":"turn_end","turn":1}`,
		`{"type":"tool_result","turn":2,"call_id":"c","tool":"read_file","status":"ok","content":"k","truncated":false,"class":"secret","untrusted":false}`,
		`{"type":"user","turn":2,"text":"secret matter"}`, `{"type":"turn_end","turn":2}`)
	turns, err := ReadLog(p)
	if err != nil || len(turns) != 2 || turns[1].Class != dataclass.Secret {
		t.Fatalf("ReadLog = %+v, %v", turns, err)
	}
	x := openIndex(t, dir, dataclass.Private)
	if n, err := x.AddTurns(turns); err != nil || n != 1 {
		t.Errorf("AddTurns = %d, %v; want only the private turn", n, err)
	}
	if hits, _ := x.Recall(context.Background(), "matter", 5, ""); len(hits) != 1 || hits[0].Class != dataclass.Private {
		t.Errorf("hits = %+v", hits)
	}
}

// corpus draws words as English does: a few stopwords make up much of
// the text, and topic words follow Zipf's law over a 20,000-word
// vocabulary, so most words are rare and a few are everywhere.
type corpus struct {
	rng   *rand.Rand
	zipf  *rand.Zipf
	vocab []string
}

func newCorpus(seed uint64) *corpus {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	syl := strings.Fields("ka te ri mo sun la ven dor pi qua el bra no fi zu ter mal gon shi ra")
	vocab := make([]string, 20000)
	for i := range vocab {
		w := ""
		for n := i; ; n /= len(syl) {
			w += syl[n%len(syl)]
			if n < len(syl) {
				break
			}
		}
		vocab[i] = w
	}
	return &corpus{rng: rng, zipf: rand.NewZipf(rng, 1.1, 2, uint64(len(vocab)-1)), vocab: vocab}
}

var stops = strings.Fields("the a of to and in is it that for on with as was")

func (c *corpus) word() string {
	if c.rng.IntN(3) == 0 {
		return stops[c.rng.IntN(len(stops))]
	}
	return c.vocab[c.zipf.Uint64()]
}

// buildIndex indexes n session records (user messages and answers) of
// realistic length, ten to a turn, once per process per size.
var built sync.Map

func buildIndex(b *testing.B, n int) *Index {
	if x, ok := built.Load(n); ok {
		return x.(*Index)
	}
	dir, err := os.MkdirTemp("", "recallbench")
	if err != nil {
		b.Fatal(err)
	}
	x, err := Open(filepath.Join(dir, "recall.db"), dataclass.Private, nil)
	if err != nil {
		b.Fatal(err)
	}
	c := newCorpus(1)
	var turns []Turn
	for i := 0; i < n; i += 10 {
		t := Turn{Session: fmt.Sprintf("s%d", i/1000), Turn: int64(i % 1000), Class: dataclass.Private}
		// A quarter of the sessions are the agent's own, the rest in
		// three projects (benchProjects), so every recall filters.
		project := benchProjects[(i/1000)%len(benchProjects)]
		for j := 0; j < 10 && i+j < n; j++ {
			words := make([]string, 8+c.rng.IntN(60))
			for k := range words {
				words[k] = c.word()
			}
			t.Docs = append(t.Docs, Doc{Text: strings.Join(words, " "), Source: SourceOf(j%7 == 0), Class: dataclass.Private,
				Session: t.Session, Turn: t.Turn, Record: j + 1, Project: project})
		}
		turns = append(turns, t)
		if len(turns) == 500 {
			if _, err := x.AddTurns(turns); err != nil {
				b.Fatal(err)
			}
			turns = nil
		}
	}
	if _, err := x.AddTurns(turns); err != nil {
		b.Fatal(err)
	}
	built.Store(n, x)
	return x
}

// benchProjects are the projects of buildIndex's sessions, in turn.
var benchProjects = []string{"", "p1", "p2", "p3"}

// BenchmarkRecall100k: recall over 100,000 indexed session records
// (a quarter the agent's own, the rest in three projects), from a
// thread of no project, reporting the 95th percentile latency (the goal
// is under 20 ms).
func BenchmarkRecall100k(b *testing.B) {
	x := buildIndex(b, 100_000)
	c := newCorpus(3)
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// A query names two or three topic words, maybe with a stopword.
		q := c.vocab[c.zipf.Uint64()] + " the " + c.vocab[c.zipf.Uint64()]
		if i%2 == 0 {
			q += " " + c.vocab[c.zipf.Uint64()]
		}
		start := time.Now()
		hits, err := x.Recall(context.Background(), q, 5, "")
		lat = append(lat, time.Since(start))
		if err != nil {
			b.Fatalf("Recall(%q) = %d hits, %v", q, len(hits), err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
}

// FuzzReadLog: a session log may be damaged; the reader refuses or
// accepts it without panicking, and what it accepts is labelled: every
// document has a valid class and a known source.
func FuzzReadLog(f *testing.F) {
	f.Add([]byte(`{"type":"user","turn":1,"text":"hi"}` + "\n" + `{"type":"turn_end","turn":1}` + "\n"))
	f.Add([]byte(`{"type":"tool_result","turn":1,"call_id":"c","tool":"t","status":"ok","content":"","truncated":false,"class":"secret","untrusted":true}` + "\n" + `{"type":"turn_end","turn":1}` + "\n"))
	f.Add([]byte("{\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "s1", "0.jsonl")
		os.MkdirAll(filepath.Dir(p), 0o700)
		os.WriteFile(p, b, 0o600)
		turns, err := ReadLog(p)
		if err != nil {
			return
		}
		for _, tr := range turns {
			for _, d := range tr.Docs {
				if !d.Class.Valid() || (d.Source != SourceMemory && d.Source != SourceTainted) || d.Session != "s1" {
					t.Fatalf("doc %+v", d)
				}
			}
		}
	})
}

func TestCommonAndRareWords(t *testing.T) {
	x := openIndex(t, t.TempDir(), dataclass.Private)
	var turns []Turn
	for i := range commonDocs + 10 {
		text := fmt.Sprintf("kettle number %d", i)
		if i == 7 {
			text += " ferrous"
		}
		turns = append(turns, Turn{Session: "s1", Turn: int64(i + 1), Class: dataclass.Private,
			Docs: []Doc{{Text: text, Source: SourceMemory, Class: dataclass.Private, Session: "s1", Turn: int64(i + 1), Record: 1}}})
	}
	if _, err := x.AddTurns(turns); err != nil {
		t.Fatal(err)
	}
	hits, err := x.Recall(context.Background(), "kettle", 2, "")
	if err != nil || len(hits) != 2 || hits[0].Turn != commonDocs+10 || hits[1].Turn != commonDocs+9 {
		t.Errorf("common word: %+v, %v; want the two most recent", hits, err)
	}
	hits, err = x.Recall(context.Background(), "the kettle called Ferrous", 3, "")
	if err != nil || len(hits) != 1 || hits[0].Turn != 8 {
		t.Errorf("rare word: %+v, %v; want the one record", hits, err)
	}
}

// TestSnippetCap: a long hit's snippet stays within SnippetCap bytes,
// the mark included, and never splits a character.
func TestSnippetCap(t *testing.T) {
	dir := t.TempDir()
	long := "tea " + strings.Repeat("é", SnippetCap)
	p := writeLog(t, dir, "s1", `{"type":"user","turn":1,"text":"`+long+`"}`, `{"type":"turn_end","turn":1}`)
	turns, err := ReadLog(p)
	if err != nil {
		t.Fatal(err)
	}
	x := openIndex(t, dir, dataclass.Private)
	if _, err := x.AddTurns(turns); err != nil {
		t.Fatal(err)
	}
	hits, err := x.Recall(context.Background(), "tea", 1, "")
	if err != nil || len(hits) != 1 {
		t.Fatalf("Recall = %+v, %v", hits, err)
	}
	if s := hits[0].Snippet; len(s) > SnippetCap || !strings.HasSuffix(s, "…") || !utf8.ValidString(s) {
		t.Errorf("snippet of %d bytes (cap %d), ends %q", len(s), SnippetCap, s[max(0, len(s)-8):])
	}
}
