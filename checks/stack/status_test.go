package stack

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// statusMasks hide what differs between runs of TestStackStatus: the
// state directory, the fake's port, build versions, durations and the
// prefill time.
var statusMasks = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`version [^(]*\(`), "version V ("},
	{regexp.MustCompile(`127\.0\.0\.1:[0-9]+`), "127.0.0.1:PORT"},
	{regexp.MustCompile(`prefill [0-9]+\.[0-9] s`), "prefill S s"},
	{regexp.MustCompile(`[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]+Z`), "TIME"},
	{regexp.MustCompile(`[0-9]+(\.[0-9]+)?(ms|µs|s)\b`), "D"},
}

// TestStackStatus: `bxctl status` against a running stack (gatewayd not
// configured, so down) after a turn with a tool call: each role, the
// model and its slot, the session's epoch, context and cache reuse, no
// approvals, fleet memory off, no anchor, no jobs (golden, times masked);
// and again once the stack is stopped, within its bound.
func TestStackStatus(t *testing.T) {
	bin, state, srv := stack(t, 65536)
	exited := up(t, bin, state, srv)
	recallTurn(srv, 1)
	require.Contains(t, chat(t, bin, state, "s1", "question 1"), "Answer 1.")
	anchors := filepath.Join(t.TempDir(), "anchors")
	out, err := bxctl(t, bin, "status", "--state", state, "--anchors", anchors)
	require.NoError(t, err, out)
	got := strings.ReplaceAll(out, state, "STATE")
	for _, m := range statusMasks {
		got = m.re.ReplaceAllString(got, m.with)
	}
	golden := filepath.Join("testdata", "status.txt")
	if os.Getenv("BOXMAKER_UPDATE_GOLDEN") != "" {
		require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), got)
	stopStack(t, bin, exited)
	out, err = bxctl(t, bin, "status", "--state", state, "--anchors", anchors, "--json", "--timeout", "5s", "--probe-timeout", "1s")
	require.NoError(t, err, out)
	require.Contains(t, out, `"up": false`)
	require.NotContains(t, out, `"up": true`)
}
