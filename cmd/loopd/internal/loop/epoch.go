package loop

import (
	"context"
	"log/slog"

	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"

	"wntrmute.dev/boxmaker/cmd/loopd/internal/epoch"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/memory"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/server"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/loopd"
	"wntrmute.dev/boxmaker/pkg/model/llama"
)

// policy is when a session changes epoch: [epoch] with package epoch's
// defaults for its zero values.
func policy(c loopd.Config) server.Policy {
	p := server.Policy{IdleAfter: ms(c.Epoch.IdleAfterMS), CompactAt: c.Epoch.CompactAtPercent}
	switch {
	case c.Epoch.IdleAfterMS == 0:
		p.IdleAfter = epoch.DefaultIdleAfter
	case c.Epoch.IdleAfterMS < 0:
		p.IdleAfter = 0
	}
	if p.CompactAt == 0 {
		p.CompactAt = epoch.DefaultCompactAtPercent
	}
	return p
}

// changer builds the epoch changer: the summary on the background slot,
// the warm start (if on) on the main slot, the baseline built as a new
// session's is, for the next epoch.
func changer(c loopd.Config, log *slog.Logger, main, bg *llama.Client, nCtx int, system string, mem *memory.Client) *epoch.Changer {
	ch := &epoch.Changer{Summarise: bg, MaxTokens: c.Epoch.SummaryMaxTokens, NCtx: nCtx, Log: log,
		Baseline: func(ctx context.Context, id, channel string, n int64) (sessionlog.Baseline, error) {
			return baseline(ctx, c, system, mem, id, channel, n)
		}}
	if c.Epoch.Prewarm == nil || *c.Epoch.Prewarm {
		ch.Warm = main
	}
	killAt(log)
	return ch
}
