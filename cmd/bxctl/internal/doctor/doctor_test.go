package doctor

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/report.golden.json")

// TestJSONShape: testdata/report.golden.json is the shape of --json for
// machines: a findings array of id, severity, message and runbook, and
// the exit code.
func TestJSONShape(t *testing.T) {
	r := Report{Findings: []Finding{
		{ID: "doctor-config", Severity: OK, Message: "5 configs read from /s/config", Runbook: Checks["doctor-config"]},
		{ID: "doctor-secrets", Severity: Warn, Message: "brokerd.toml [secrets] GITHUB_TOKEN is env:GH_TOKEN (plaintext in the environment)", Runbook: Checks["doctor-secrets"]},
		{ID: "doctor-tool-image", Severity: Problem, Message: "the tool image sha256:77 is not in the storage of the Podman service on /s/run/podman/podman.sock (it is never pulled)", Runbook: Checks["doctor-tool-image"]},
	}}
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "report.golden.json")
	if *update {
		os.WriteFile(golden, b.Bytes(), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("--json =\n%s\nwant (%s)\n%s", b.Bytes(), golden, want)
	}
	var empty bytes.Buffer
	Report{}.WriteJSON(&empty)
	if !strings.Contains(empty.String(), `"findings": []`) || !strings.Contains(empty.String(), `"exit": 0`) {
		t.Errorf("an empty report is %s; want an empty array, not null", empty.String())
	}
}

func TestExit(t *testing.T) {
	f := func(s ...Severity) Report {
		var r Report
		for _, x := range s {
			r.Findings = append(r.Findings, Finding{ID: "doctor-config", Severity: x})
		}
		return r
	}
	for _, tt := range []struct {
		r    Report
		want int
	}{{f(OK, OK), ExitClean}, {f(OK, Warn), ExitWarnings}, {f(Warn, Problem, OK), ExitProblems}, {f(Problem, Warn), ExitProblems}} {
		if got := tt.r.Exit(); got != tt.want {
			t.Errorf("Exit(%v) = %d, want %d", tt.r.Findings, got, tt.want)
		}
	}
}

// TestChecksHaveEntries: every finding id is kebab-case and points at its
// own runbook anchor, which exists with its five parts (checks/arch
// checks the parts of every entry).
func TestChecksHaveEntries(t *testing.T) {
	rb, err := os.ReadFile("../../../../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	kebab := regexp.MustCompile(`^[a-z]+(-[a-z]+)+$`)
	for id, ptr := range Checks {
		if !kebab.MatchString(id) || ptr != "see docs/runbook.md#"+id {
			t.Errorf("%s points at %q; want a kebab-case id pointing at its own entry", id, ptr)
		}
		if !regexp.MustCompile(`(?m)^## ` + id + `$`).Match(rb) {
			t.Errorf("docs/runbook.md has no entry %s", id)
		}
	}
}

// TestDestinationsAreEgressRows: each config key doctor accepts as a
// destination is in docs/egress.md's table, as its role's row and its
// "configured by" file; and each row configured by a role's config file
// is one of doctor's destinations, so a destination added to the
// document without doctor (or to doctor without the document) fails.
func TestDestinationsAreEgressRows(t *testing.T) {
	doc, err := os.ReadFile("../../../../docs/egress.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // config file -> the row
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 6 {
			continue
		}
		by := strings.Trim(strings.TrimSpace(cells[4]), "`")
		if strings.HasSuffix(by, ".toml") {
			rows[by] = line
		}
	}
	if len(rows) == 0 {
		t.Fatal("no row of docs/egress.md is configured by a config file: the table moved")
	}
	have := map[string]bool{}
	for _, d := range Destinations {
		have[d.File] = true
		row, ok := rows[d.File]
		switch {
		case !ok:
			t.Errorf("%s %s: no row of docs/egress.md is configured by %s", d.Role, d.Key, d.File)
		case !strings.HasPrefix(strings.TrimSpace(row), "| "+d.Role+" |") || !strings.Contains(row, "`"+d.Key+"`"):
			t.Errorf("%s %s: the row for %s is %q", d.Role, d.Key, d.File, row)
		}
	}
	for file := range rows {
		if !have[file] {
			t.Errorf("docs/egress.md has a row configured by %s, which doctor does not know as a destination", file)
		}
	}
}

func TestLooksLikeAddress(t *testing.T) {
	for s, want := range map[string]bool{
		"127.0.0.1:8080": true, "https://x.example": true, "llama:8080": true, "[::1]:80": true,
		"/run/boxmaker/loop/x.toml": false, "unix:///run/podman.sock": false, "credential:mattermost-token": false,
		"env:X": false, "private": false, "sha256:" + strings.Repeat("0", 64): false, "file:/etc/x": false,
	} {
		if got := looksLikeAddress(s); got != want {
			t.Errorf("looksLikeAddress(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestPlaceHost(t *testing.T) {
	for h, want := range map[string]string{
		"127.0.0.1": "loopback", "::1": "loopback", "localhost": "loopback", "10.0.0.5": "local", "100.101.102.103": "local",
		"straylight.scylla-hammerhead.ts.net": "local", "straylight": "local", "8.8.8.8": "public", "llm.example.com": "unknown",
	} {
		if got := placeHost(h); got != want {
			t.Errorf("placeHost(%q) = %q, want %q", h, got, want)
		}
	}
}
