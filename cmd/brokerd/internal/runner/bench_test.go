package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkRunPhases runs read_file through the runner and reports how
// long each step of the container lifecycle takes, in ms per call
// (docs/runner.md has a run's numbers). The removal runs after the
// answer ("remove after the answer"); each call's is waited for before
// the next call starts, so it never overlaps one.
func BenchmarkRunPhases(b *testing.B) {
	_, p := toolRunnerB(b)
	dir := b.TempDir()
	os.WriteFile(filepath.Join(dir, "f.txt"), []byte("hello\n"), 0o644)
	d := decide(b, autoGrant("r", "read_file", []string{dir}), "read_file", map[string]string{"path": dir + "/f.txt"})
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
		if out, err := p.Run(context.Background(), d); err != nil || out.Stdout != "hello\n" {
			b.Fatalf("Run = %+v, %v", out, err)
		}
		settled(b, p)
	}
	b.StopTimer()
	for _, step := range order {
		b.ReportMetric(float64(total[step].Microseconds())/1000/float64(b.N), strings.ReplaceAll(step, " ", "_")+"-ms")
	}
}
