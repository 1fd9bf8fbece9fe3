package runner

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestDecisionsLoggedAsTheyArrive: each complete line of the proxy's
// stderr is logged when it arrives, not when the proxy stops; long lines
// are cut and a flood is bounded (review 18).
func TestDecisionsLoggedAsTheyArrive(t *testing.T) {
	var buf bytes.Buffer
	d := newDecisionLog(slog.New(slog.NewTextHandler(&buf, nil)))
	d.Write([]byte(`{"host":"a.example","ok":tr`))
	if buf.Len() != 0 {
		t.Fatalf("a partial line was logged: %s", buf.String())
	}
	d.Write([]byte("ue}\n{\"host\":\"b.exa"))
	if got := strings.Count(buf.String(), "egress proxy"); got != 1 || !strings.Contains(buf.String(), `a.example`) {
		t.Fatalf("after one full line, the log has %d records: %s", got, buf.String())
	}
	d.Flush()
	if !strings.Contains(buf.String(), "b.exa") {
		t.Errorf("Flush lost the last line: %s", buf.String())
	}
	buf.Reset()
	d.Write([]byte(strings.Repeat("x", 3*maxDecisionLine) + "\n"))
	if buf.Len() > maxDecisionLine+200 || !strings.Contains(buf.String(), "cut=true") {
		t.Errorf("a long line logged as %d bytes", buf.Len())
	}
	buf.Reset()
	d.Write([]byte(strings.Repeat("y\n", 2*maxDecisionLines)))
	if n := strings.Count(buf.String(), "decision=y"); n != maxDecisionLines-3 || !strings.Contains(buf.String(), "not logged") {
		t.Errorf("a flood logged %d lines", n)
	}
}
