package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// TestAuditLinks: over a real audit log (written by package audit's
// writer, as brokerd writes it), the why-chain names the tool result that
// made the session untrusted by its seq and line hash, the call's tool
// and arguments, and the memory call's decision; another session's
// records and later ones are not taken for it.
func TestAuditLinks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	w, err := audit.Open(dir, audit.Options{Now: func() time.Time { clock = clock.Add(time.Second); return clock }})
	if err != nil {
		t.Fatal(err)
	}
	dec := func(session, tool, args string, untrusted bool) int64 {
		seq, err := w.Append(&audit.Decision{Record: audit.DecisionRecord{Session: session, Tool: tool, Arguments: json.RawMessage(args),
			Verdict: audit.Verdict{Outcome: audit.Allowed, Grant: &audit.GrantRef{ID: "pages-read", SHA256: strings.Repeat("ab", 32)}, Taint: dataclass.Private, Untrusted: untrusted}}})
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	res := func(d int64, untrusted bool, sum ...string) {
		sha := strings.Repeat("12", 32)
		if len(sum) > 0 {
			sha = sum[0]
		}
		if _, err := w.Append(&audit.Result{Decision: d, SHA256: sha, Size: 99, Class: dataclass.Private, Untrusted: untrusted}); err != nil {
			t.Fatal(err)
		}
	}
	other := dec("s9", "read_file", `{"path":"/other"}`, false)
	res(other, true) // another session's untrusted read
	clean := dec("s3", "read_file", `{"path":"/notes.txt"}`, false)
	res(clean, false)
	page := dec("s3", "read_file", `{"path":"/pages/oolong.html"}`, false)
	res(page, true) // seq 6: the one that taints s3
	mem := dec("s3", "memory", `{"action":"note","text":"x"}`, true)
	res(mem, false, strings.Repeat("34", 32))
	at := clock.Format(time.RFC3339)
	clock = clock.Add(time.Hour)
	later := dec("s3", "memory", `{"action":"note","text":"later"}`, true)
	res(later, false)
	w.Close()

	hashes := map[int64]string{}
	if err := audit.Records(dir, func(r audit.Record, h string) error { hashes[r.Head().Seq] = h; return nil }); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	chain := &wire.WhyChain{ID: "n1", Session: "s3", At: at, Steps: []string{"note n1: kind note"}}
	printWhy(chain, auditLinks(dir, chain), &out)
	got := out.String()
	for _, want := range []string{
		"why n1:\n  note n1: kind note\n",
		"audit: the memory call: decision seq 7 (line hash " + hashes[7] + ", matched by time: the session's last memory call before the entry), session s3 untrusted, taint private",
		"audit: the session became untrusted by the read_file result: result seq 6 (line hash " + hashes[6] + "), output sha256 " + strings.Repeat("12", 32),
		"of the call decided at seq 5 (line hash " + hashes[5] + `): read_file {"path":"/pages/oolong.html"}, grant pages-read`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("why lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "/other") || strings.Contains(got, "seq 9") {
		t.Errorf("why took another session's or a later record:\n%s", got)
	}
	// With the result's hash, the call is found even when a later one
	// is nearer the entry's time.
	late := &wire.WhyChain{ID: "n1", Session: "s3", At: clock.Format(time.RFC3339), Output: strings.Repeat("34", 32)}
	if links := auditLinks(dir, late); len(links) == 0 || !strings.Contains(links[0], "decision seq 7 (line hash "+hashes[7]+", matched by its result's hash)") {
		t.Errorf("hash match = %q", links)
	}
	if links := auditLinks(filepath.Join(dir, "missing"), chain); len(links) != 1 || !strings.Contains(links[0], "see docs/runbook.md#memory-why-audit-unreadable") {
		t.Errorf("unreadable log = %q", links)
	}
	if links := auditLinks(dir, &wire.WhyChain{Session: wire.OwnerSession, At: at}); links != nil {
		t.Errorf("the owner's entry has audit links: %q", links)
	}
}
