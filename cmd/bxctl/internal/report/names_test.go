package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/socket/wire"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// TestReportToolNamesBounded: tool names the model chose (terminal
// escapes, newlines, a thousand made-up names) reach neither the text
// report nor the metrics: each is counted as "other", so the labels
// take at most one value per tool plus one.
func TestReportToolNamesBounded(t *testing.T) {
	state := t.TempDir()
	hostile := []string{"\x1b]0;pwned\x07", "read_file\n# TYPE x counter", "\u202eelif_daer", `a"b\c`}
	for i := range 1000 {
		hostile = append(hostile, fmt.Sprintf("made_up_%d", i))
	}
	sess := filepath.Join(layout.Sessions.In(state), "s1")
	if err := os.MkdirAll(sess, 0o700); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	for i, name := range append([]string{"read_file"}, hostile...) {
		line, err := sessionlog.Records.Encode(&sessionlog.ToolResult{Turn: int64(i + 1), CallID: "c1", Tool: name, Status: wire.StatusDenied, Content: "no", Label: dataclass.Label{Class: dataclass.Private}})
		if err != nil {
			t.Fatal(err)
		}
		log.Write(append(line, '\n'))
	}
	if err := os.WriteFile(filepath.Join(sess, "0.jsonl"), log.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(layout.Audit.In(state), 0o700); err != nil {
		t.Fatal(err)
	}
	w, err := audit.Open(layout.Audit.In(state), audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range hostile[:4] {
		if _, err := w.Append(&audit.Decision{Record: audit.DecisionRecord{Session: "s1", Tool: name, Arguments: json.RawMessage(`{}`),
			Verdict: audit.Verdict{Outcome: audit.Denied, Reason: audit.NoGrant, Taint: dataclass.Private}}}); err != nil {
			t.Logf("the audit log refuses %q: %v", name, err)
		}
	}
	w.Close()
	r, err := Collect(state, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []map[string]map[string]int{r.Results, r.Decisions} {
		for k := range m {
			if _, ok := toolset.Lookup(k); !ok && k != OtherTool {
				t.Errorf("tool key %q is neither a tool nor %q", k, OtherTool)
			}
		}
	}
	if r.Results[OtherTool]["denied"] != len(hostile) || r.Results["read_file"]["denied"] != 1 {
		t.Errorf("results = %v", r.Results)
	}
	var text, prom bytes.Buffer
	r.WriteText(&text)
	if err := r.WriteProm(&prom, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{text.String(), prom.String()} {
		if strings.ContainsAny(out, "\x1b\x07\u202e") || strings.Contains(out, "pwned") || strings.Contains(out, "made_up") || strings.Contains(out, "# TYPE x") {
			t.Errorf("a model-chosen name reached the output:\n%q", out)
		}
	}
	tools := map[string]bool{}
	for _, m := range regexp.MustCompile(`tool="([^"]*)"`).FindAllStringSubmatch(prom.String(), -1) {
		tools[m[1]] = true
	}
	if len(tools) > len(toolset.All)+1 || !tools[OtherTool] {
		t.Errorf("tool label values: %v", tools)
	}
}
