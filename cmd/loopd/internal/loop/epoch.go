package loop

import (
	"context"
	"fmt"
	"log/slog"

	"wntrmute.dev/boxmaker/cmd/loopd/internal/epoch"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/memory"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/server"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/session"
	"wntrmute.dev/boxmaker/pkg/model/llama"
)

// EpochConfig is [epoch] in loopd.toml: when a session's epoch changes
// (package server, epoch.go) and how (package epoch).
type EpochConfig struct {
	// IdleAfterMS: a session idle this long whose context is over
	// CompactAtPercent of the slot changes epoch. Default 10 minutes; 0
	// is the default, and a negative value turns the idle trigger off
	// (bxctl compact and a full context still change epochs).
	IdleAfterMS      int64 `toml:"idle_after_ms"`
	CompactAtPercent int   `toml:"compact_at_percent"` // default 60
	// SummaryMaxTokens caps the summary request; default 1024.
	SummaryMaxTokens int `toml:"summary_max_tokens"`
	// Prewarm sends the new prefix to the session's slot after a change,
	// so its first turn finds it cached. Default on.
	Prewarm *bool `toml:"prewarm"`
}

func (e EpochConfig) check() error {
	if e.CompactAtPercent < 0 || e.CompactAtPercent > 100 {
		return fmt.Errorf("epoch.compact_at_percent is %d, want 1 to 100 (0 for the default, %d)", e.CompactAtPercent, epoch.DefaultCompactAtPercent)
	}
	if e.SummaryMaxTokens < 0 {
		return fmt.Errorf("epoch.summary_max_tokens is %d, want a positive number (0 for the default, %d)", e.SummaryMaxTokens, epoch.DefaultSummaryMaxTokens)
	}
	return nil
}

func (c Config) policy() server.Policy {
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
func (c Config) changer(log *slog.Logger, main, bg *llama.Client, nCtx int, system string, mem *memory.Client) *epoch.Changer {
	ch := &epoch.Changer{Summarise: bg, MaxTokens: c.Epoch.SummaryMaxTokens, NCtx: nCtx, Log: log,
		Baseline: func(ctx context.Context, id, channel string, n int64) (session.Baseline, error) {
			return c.Baseline(ctx, system, mem, id, channel, n)
		}}
	if c.Epoch.Prewarm == nil || *c.Epoch.Prewarm {
		ch.Warm = main
	}
	killAt(log)
	return ch
}
