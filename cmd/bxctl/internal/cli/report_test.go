package cli

import (
	"strings"
	"testing"
	"time"
)

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"", time.Time{}, true},
		{"2026-11-20", time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC), true},
		{"2026-11-20T08:00:00Z", time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC), true},
		{"7d", now.Add(-7 * 24 * time.Hour), true},
		{"36h", now.Add(-36 * time.Hour), true},
		{"-3h", time.Time{}, false}, {"0d", time.Time{}, false}, {"yesterday", time.Time{}, false},
	} {
		got, err := parseSince(c.in, now)
		if (err == nil) != c.ok || !got.Equal(c.want) {
			t.Errorf("parseSince(%q) = %v, %v", c.in, got, err)
		}
	}
}

func TestReportCommand(t *testing.T) {
	code, out, stderr := run("report", "--state", "../report/testdata/state")
	if code != ExitOK || !strings.Contains(out, "raise the cap") {
		t.Errorf("report = %d, %q, %q", code, out, stderr)
	}
	code, out, _ = run("report", "--state", "../report/testdata/state", "--json", "--since", "2026-11-22")
	if code != ExitOK || !strings.Contains(out, `"since": "2026-11-22T00:00:00Z"`) {
		t.Errorf("report --json --since = %d, %q", code, out)
	}
	if code, _, _ := run("report", "--since", "soon"); code != ExitUsage {
		t.Errorf("a bad --since: %d", code)
	}
}

func TestMetricsCommand(t *testing.T) {
	code, out, stderr := run("metrics", "--state", "../report/testdata/state", "--out", "-")
	if code != ExitOK || !strings.Contains(out, "boxmaker_thinking_cap_raise 1\n") {
		t.Errorf("metrics --out - = %d, %q, %q", code, out, stderr)
	}
	code, _, stderr = run("metrics", "--state", t.TempDir())
	if code != ExitFailed || !strings.Contains(stderr, "#metrics-not-written") {
		t.Errorf("metrics without a metrics directory = %d, %q", code, stderr)
	}
}
