package status

import (
	"encoding/json"
	"fmt"
	"io"
)

// WriteJSON writes the status as indented JSON.
func (st *Status) WriteJSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(st)
}

// WriteText writes the status, one item a line.
func (st *Status) WriteText(w io.Writer) {
	for _, r := range st.Roles {
		state := "down"
		if r.Up {
			state = "up, version " + r.Version
		}
		fmt.Fprintf(w, "%-10s %s (%s)\n", r.Name, state, r.Detail)
	}
	fmt.Fprintf(w, "model      %s on slot %d; %s\n", orNone(st.Model), st.Slot, st.Server)
	full := "size unknown (llama-server did not say)"
	if st.SlotContext > 0 {
		full = fmt.Sprintf("%d of %d tokens (%d%%)", st.ContextTokens, st.SlotContext, st.ContextTokens*100/st.SlotContext)
	}
	fmt.Fprintf(w, "session    %s: epoch %d, %d compaction(s), last turn %d; context %s\n", orNone(st.Session), st.Epoch, st.Compactions, st.Turn, full)
	fmt.Fprintf(w, "cache      last turn re-read %d tokens beyond the new suffix, reused %d; today's prefill %d.%d s\n",
		st.Reread, st.Cached, st.TodayPrefillUS/1e6, st.TodayPrefillUS%1e6/1e5)
	switch {
	case st.ApprovalsErr != "":
		fmt.Fprintf(w, "approvals  brokerd: %s\n", st.ApprovalsErr)
	case len(st.Approvals) == 0:
		fmt.Fprintln(w, "approvals  none pending")
	default:
		for _, c := range st.Approvals {
			fmt.Fprintf(w, "approvals  #%d %s in session %s, expires %s\n", c.ID, c.Tool, c.Session, c.Expires)
		}
	}
	switch {
	case st.AllowancesErr != "":
		fmt.Fprintf(w, "allowances brokerd: %s\n", st.AllowancesErr)
	case len(st.Allowances) == 0:
		fmt.Fprintln(w, "allowances none in force")
	default:
		for _, a := range st.Allowances {
			fmt.Fprintf(w, "allowances #%d %s (%s) in session %s, until %s\n", a.ID, a.Tool, a.Scope, a.Session, a.Expires)
		}
	}
	fmt.Fprintf(w, "fleet      %s\n", st.Fleet)
	if st.AnchorAge == "none" {
		fmt.Fprintln(w, "audit      no anchor of the audit log (bxctl audit anchor records one)")
	} else {
		fmt.Fprintf(w, "audit      newest anchor %s old\n", st.AnchorAge)
	}
	switch {
	case st.JobsErr != "":
		fmt.Fprintf(w, "jobs       loopd: %s\n", st.JobsErr)
	case len(st.Jobs) == 0:
		fmt.Fprintln(w, "jobs       none")
	default:
		for _, j := range st.Jobs {
			fmt.Fprintf(w, "jobs       %s next %s\n", j.Name, orNone(j.Next))
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
