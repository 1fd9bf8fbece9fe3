package policy

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

var update = flag.Bool("update", false, "rewrite testdata/records.golden")

// TestRecordsGolden pins the shape of the audit summary of each kind of
// outcome: what the audit log's decision record is built from.
func TestRecordsGolden(t *testing.T) {
	gs := set(t,
		g("notes", "read_file", "auto", "paths", paths("/home/o/notes"), "result_class", `"private"`, "untrusted", "false"),
		g("drafts", "write_file", "ask", "paths", paths("/home/o/drafts")),
		g("ssh", "shell", "deny", "paths", paths("/home/o/.ssh")),
		g("src", "shell", "auto", "paths", paths("/home/o/src"), "writable", "true"),
		g("docs", "http_fetch", "ask", "hosts", hosts("docs.python.org"), "result_class", `"public"`),
	)
	var lines []string
	add := func(r Record) {
		b, err := strict.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	for _, r := range []Request{
		read("/home/o/notes/todo.md"),
		via(write("/home/o/drafts/a.md")),
		shell("/home/o/.ssh"),
		shell("/home/o/src/boxmaker"),
		fetch("https://docs.python.org/3/"),
		raw("recall", `{"query":"grants"}`),
		read("/etc/passwd"),
		raw("read_file", `{"path":"/home/o/../../etc/passwd"}`),
		raw("exec", `{}`),
	} {
		d, a, n := decide(t, gs, r, private)
		switch {
		case n != nil:
			add(n.Record())
		case a != nil:
			add(a.Record())
			rd, _ := Redecide(gs, a.Request, private, now)
			add(rd.Record())
		default:
			add(d.Record())
		}
	}
	_, _, n := decide(t, nil, read("/home/o/notes/todo.md"), Session{})
	add(n.Record())
	got := strings.Join(lines, "\n") + "\n"
	golden := filepath.Join("testdata", "records.golden")
	if *update {
		os.WriteFile(golden, []byte(got), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("records changed (run with -update after review):\n got %s\nwant %s", got, want)
	}
}
