package jobs

import (
	"context"
	"fmt"
	"strings"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/loopd/schedule"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/escape"
)

// TieringName is the built-in memory tiering job's name; no job file may
// take it.
const TieringName = "memory-tiering"

// tieringCalls caps the run: one consolidate per file, and an answer.
const tieringCalls = 4

// Tiering is the built-in tiering job on schedule s: each run asks
// memoryd (stats) for the agent-written identity files' entries with
// their recall counts, and asks the model, in a session of its own, to
// propose which stay and which move to notes as one consolidate per
// file. The proposal is the model's memory tool call, decided by brokerd
// and journalled (and undoable) by memoryd like every other write; this
// job writes nothing itself.
func Tiering(s schedule.Schedule, stats func(ctx context.Context, session string) (*wire.TieringStats, error)) Job {
	return Job{Name: TieringName, File: "(built in)", Schedule: s, Deliver: Deliver{Kind: "log"}, Caps: Caps{MaxCalls: tieringCalls},
		SHA256: "builtin",
		Build: func(ctx context.Context, session string) (string, error) {
			st, err := stats(ctx, session)
			if err != nil {
				return "", fmt.Errorf("tiering: %v", err)
			}
			return TieringPrompt(st), nil
		}}
}

// TieringPrompt is the tiering run's message. Each entry is one line
// (escaped), numbered in file order as consolidate's plan counts them.
func TieringPrompt(st *wire.TieringStats) string {
	var b strings.Builder
	b.WriteString(`Memory tiering. Your identity files are in every prompt and are short; notes are recalled when needed. Below are the entries of each identity file you write, in file order, with how many of your recalls found each and when the last one did.

Decide which entries stay in identity and which move to notes, where recall still finds them: keep what is used or essential to who you are and whom you serve; move what is stale or rarely needed. For each file where anything should move, call the memory tool once with action "consolidate", that file, and a plan of exactly one step per entry, in order, each {"op":"keep"} or {"op":"move"}. Do not rewrite or drop entries and call no other tool. If everything should stay, call nothing. Then answer with one line per file saying what you kept and moved.
`)
	for _, f := range st.Files {
		file := strings.TrimSuffix(f.File, ".md")
		fmt.Fprintf(&b, "\n%s (file %q, %d entries):\n", f.File, file, len(f.Entries))
		if len(f.Entries) == 0 {
			b.WriteString("(empty: nothing to decide)\n")
		}
		for i, e := range f.Entries {
			last := e.LastFound
			if last == "" {
				last = "never"
			}
			fmt.Fprintf(&b, "%d. [found %d times, last %s] %s\n", i+1, e.Hits, escape.Line(last), escape.Line(e.Text))
		}
	}
	return b.String()
}
