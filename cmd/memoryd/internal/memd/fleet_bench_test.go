package memd

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	fake "wntrmute.dev/boxmaker/checks/fake/honcho"
	"wntrmute.dev/boxmaker/cmd/memoryd/internal/recall"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd/honchoconf"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// benchMemd is a memoryd (no sockets) over a fake Honcho, its index
// holding n synthetic session records.
func benchMemd(b *testing.B, n int, bound time.Duration) (*Memd, *fake.Server) {
	b.Helper()
	srv := fake.New(b, fake.Options{})
	s, err := honchoconf.Parse(honchoconf.Config{URL: srv.URL, Peer: "agent", TrustedWorkspace: "host1-trusted", UntrustedWorkspace: "host1-untrusted",
		ReadBoundMS: bound.Milliseconds(), Workspaces: []honchoconf.Other{{Name: "host2-trusted", Trust: "trusted"}}})
	if err != nil {
		b.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "fleetbench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	m, err := New(slog.New(slog.DiscardHandler), Config{Config: memoryd.Config{StateDir: dir}, maxClass: dataclass.Private, fleet: &s})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	rng := rand.New(rand.NewPCG(1, 2))
	syl := strings.Fields("ka te ri mo sun la ven dor pi qua el bra no fi zu ter mal gon shi ra")
	word := func() string { return syl[rng.IntN(len(syl))] + syl[rng.IntN(len(syl))] + syl[rng.IntN(len(syl))] }
	var turns []recall.Turn
	for i := 0; i < n; i += 10 {
		t := recall.Turn{Session: fmt.Sprintf("s%d", i/1000), Turn: int64(i % 1000), Class: dataclass.Private}
		for j := 0; j < 10; j++ {
			words := make([]string, 8+rng.IntN(60))
			for k := range words {
				words[k] = word()
			}
			t.Docs = append(t.Docs, recall.Doc{Text: strings.Join(words, " "), Source: recall.SourceMemory, Class: dataclass.Private, Session: t.Session, Turn: t.Turn, Record: j + 1})
		}
		turns = append(turns, t)
		if len(turns) == 500 {
			if _, err := m.index.AddTurns(turns); err != nil {
				b.Fatal(err)
			}
			turns = nil
		}
	}
	if _, err := m.index.AddTurns(turns); err != nil {
		b.Fatal(err)
	}
	return m, srv
}

func p95(lat []time.Duration) time.Duration {
	slices.Sort(lat)
	return lat[len(lat)*95/100]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkFleetRecall reports recall's p95 through memoryd with fleet
// memory, over 100,000 local records: with Honcho answering at once (the
// goal: under 20 ms), and with Honcho slower than the read bound (the
// goal: within the local index's own p95 plus the bound; over-ms is how
// far past that it went, at most 0).
func BenchmarkFleetRecall(b *testing.B) {
	const bound = 100 * time.Millisecond
	m, srv := benchMemd(b, 100_000, bound)
	queries := []string{"kateri mosun", "venpiqua", "elbrano fizuter", "malgon", "shira kate"}
	run := func(b *testing.B, f func(q string)) []time.Duration {
		var lat []time.Duration
		for i := 0; i < b.N; i++ {
			start := time.Now()
			f(queries[i%len(queries)])
			lat = append(lat, time.Since(start))
		}
		return lat
	}
	var local time.Duration
	b.Run("fts5-only", func(b *testing.B) {
		lat := run(b, func(q string) { m.retriever.Recall(context.Background(), q, 5, "") })
		local = p95(lat)
		b.ReportMetric(ms(local), "p95-ms")
	})
	b.Run("honcho-up", func(b *testing.B) {
		srv.SetDelay(0)
		lat := run(b, func(q string) {
			if r := m.fleetRecall(context.Background(), "", q, 5); strings.Contains(r.Output, "not reached") {
				b.Fatalf("Honcho up but not reached:\n%s", r.Output)
			}
		})
		b.ReportMetric(ms(p95(lat)), "p95-ms")
	})
	b.Run("honcho-slow", func(b *testing.B) {
		srv.SetDelay(10 * bound)
		lat := run(b, func(q string) {
			if r := m.fleetRecall(context.Background(), "", q, 5); !strings.Contains(r.Output, "not reached") {
				b.Fatalf("a slow Honcho was not reported:\n%s", r.Output)
			}
		})
		got := p95(lat)
		b.ReportMetric(ms(got), "p95-ms")
		b.ReportMetric(ms(local+bound), "goal-ms")
		b.ReportMetric(ms(max(0, got-local-bound)), "over-ms")
	})
}
