package runner

import (
	"context"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/mcptest"
)

// BenchmarkMCPRoundTrip is one MCP call through the runner, the test
// server's echo in its own image (the container's lifecycle, the
// toolkit starting the server, MCP's initialize and tools/list for the
// pin check, and the call), beside BenchmarkRunPhases's built-in call;
// it reports each step's ms per call as that one does. Measure it on a
// quiet machine (docs/runner.md).
func BenchmarkMCPRoundTrip(b *testing.B) {
	svc, p := toolRunnerB(b)
	s := mcpServer(b, mcptest.ServerImage(b, svc), "pinned")
	pin := pinned(b, p, s)
	d := decideMCP(b, s, pin, mcpGrant("echo"), "echo", map[string]string{"message": "hi"})
	total := map[string]time.Duration{}
	var order []string
	p.phase = func(step string, d time.Duration) {
		if _, ok := total[step]; !ok {
			order = append(order, step)
		}
		total[step] += d
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, err := p.Run(context.Background(), d)
		if err != nil || !strings.Contains(out.Stdout, `"echo: hi"`) {
			b.Fatalf("Run = %+v, %v", out, err)
		}
		settled(b, p)
	}
	b.StopTimer()
	for _, step := range order {
		b.ReportMetric(float64(total[step].Microseconds())/1000/float64(b.N), strings.ReplaceAll(step, " ", "_")+"-ms")
	}
}
