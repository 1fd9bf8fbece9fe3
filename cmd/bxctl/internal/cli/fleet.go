package cli

import (
	"context"
	"fmt"
	"io"

	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/escape"
)

// memoryFleet is `bxctl memory [status]` (fleet memory's outbox) and
// `bxctl memory resync` (Honcho made to hold what the session logs and
// notes.md say it should).
func memoryFleet(ctx context.Context, state, sub string, stdout, stderr io.Writer) int {
	if sub == "resync" {
		d, err := ask[*wire.MemoryDone](ctx, state, &wire.Memadmin, &wire.FleetResync{})
		if err != nil {
			fmt.Fprintf(stderr, "bxctl memory resync: %v\n", err)
			return ExitFailed
		}
		fmt.Fprintln(stdout, escape.Line(d.Msg))
		return ExitOK
	}
	st, err := ask[*wire.FleetState](ctx, state, &wire.Memadmin, &wire.FleetStatus{})
	if err != nil {
		fmt.Fprintf(stderr, "bxctl memory: %v\n", err)
		return ExitFailed
	}
	if !st.Configured {
		fmt.Fprintln(stdout, "fleet memory: not configured (memoryd.toml has no [honcho] table); memory is local only")
		return ExitOK
	}
	fmt.Fprintf(stdout, "fleet memory outbox: %d pending, %d sent\nturns filed: %d trusted, %d untrusted, %d withheld (secret or above the class)\n",
		st.Pending, st.Sent, st.Trusted, st.Untrusted, st.Withheld)
	if st.Pending > 0 {
		fmt.Fprintf(stdout, "oldest pending: %s", escape.Line(st.OldestPending))
		if st.NextTry != "" {
			fmt.Fprintf(stdout, ", next try %s", escape.Line(st.NextTry))
		}
		fmt.Fprintln(stdout)
		if st.LastError != "" {
			fmt.Fprintf(stdout, "last error: %s; see docs/runbook.md#fleet-outbox-stuck\n", escape.Line(st.LastError))
		}
	}
	return ExitOK
}
