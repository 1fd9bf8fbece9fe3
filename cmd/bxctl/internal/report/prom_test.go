package report

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The text format's lines (prometheus/docs, content/docs/instrumenting/
// exposition_formats.md, "Text format details"): comments HELP and TYPE,
// samples name{label="value",...} value, no timestamps here.
var (
	helpLine   = regexp.MustCompile(`^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) [^\n]+$`)
	typeLine   = regexp.MustCompile(`^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|summary|histogram|untyped)$`)
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")*\})? (-?[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?)$`)
)

// TestPromFormat: every line of the textfile of the recorded logs is a
// HELP, a TYPE or a sample of the family last typed, each family typed
// once before its samples; and it matches the golden file.
func TestPromFormat(t *testing.T) {
	r, err := Collect(recorded, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	r.Results["we\"ird\\tool\n"] = map[string]int{"ok": 1}
	var b bytes.Buffer
	if err := r.WriteProm(&b, time.Unix(1764633600, 0)); err != nil {
		t.Fatal(err)
	}
	typed := map[string]string{}
	current := ""
	for i, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		switch {
		case helpLine.MatchString(line):
		case typeLine.MatchString(line):
			m := typeLine.FindStringSubmatch(line)
			if typed[m[1]] != "" {
				t.Errorf("line %d: %s typed twice", i+1, m[1])
			}
			typed[m[1]], current = m[2], m[1]
		case sampleLine.MatchString(line):
			name := sampleLine.FindStringSubmatch(line)[1]
			base := strings.TrimSuffix(strings.TrimSuffix(name, "_sum"), "_count")
			if name != current && !(typed[current] == "summary" && base == current) {
				t.Errorf("line %d: sample %s outside its family %s", i+1, name, current)
			}
		default:
			t.Errorf("line %d is not in the text format: %q", i+1, line)
		}
	}
	if !strings.Contains(b.String(), `tool="we\"ird\\tool\n"`) {
		t.Error("a label value was not escaped")
	}
	delete(r.Results, "we\"ird\\tool\n")
	b.Reset()
	r.WriteProm(&b, time.Unix(1764633600, 0))
	golden(t, "testdata/boxmaker.prom", b.Bytes())
}

// TestMetricsFileAtomic: the file is replaced whole, 0644, and no
// temporary file is left behind.
func TestMetricsFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, MetricsName)
	os.WriteFile(p, []byte("old\n"), 0o600)
	r, _ := Collect(recorded, time.Time{})
	if err := r.WriteMetricsFile(p, time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(p)
	b, _ := os.ReadFile(p)
	if fi.Mode().Perm() != 0o644 || !strings.HasPrefix(string(b), "# HELP boxmaker_metrics_written") {
		t.Errorf("mode %v, starts %q", fi.Mode(), b[:20])
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("left behind: %v", ents)
	}
	if err := r.WriteMetricsFile(filepath.Join(dir, "missing", MetricsName), time.Unix(1, 0)); err == nil || !strings.Contains(err.Error(), "#metrics-not-written") {
		t.Errorf("into a missing directory: %v", err)
	}
}
