// Package status is `bxctl status`: how the installation and one session
// are doing right now, read-only and bounded like the doctor.
//
// Invariants: it changes nothing (it asks the daemons' read-only
// requests, reads the session logs, the audit log's anchors and
// llama-server's /props); every probe runs under its own deadline and
// all of them under one total, so a role or a llama-server that accepts
// and never answers costs at most the bound and is reported as such;
// what a daemon or the model wrote is escaped before it is printed.
package status

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"wntrmute.dev/boxmaker/cmd/bxctl/internal/report"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/procinfo"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/inferproxy"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/loopd"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/model/llama"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/escape"
)

// Defaults for the bounds, as the doctor's.
const (
	DefaultProbe = 3 * time.Second
	DefaultTotal = 10 * time.Second
)

// Options is what one status looks at.
type Options struct {
	State   string
	Session string // "" for the session whose log was written last
	Anchors func(dir string) ([]audit.Anchor, error)
	Probe   time.Duration
	Total   time.Duration
	Now     time.Time
}

// Status is every item.
type Status struct {
	Roles       []Role `json:"roles"`
	Model       string `json:"model"`
	Slot        int    `json:"slot"`
	SlotContext int    `json:"slot_context"` // llama-server's n_ctx per slot; 0 unknown
	Server      string `json:"server"`       // llama-server's answer, or why there is none
	Session     string `json:"session"`
	Epoch       int64  `json:"epoch"`
	Compactions int64  `json:"compactions"`
	Turn        int64  `json:"last_turn"`
	// ContextTokens is the session's context after its last completion.
	ContextTokens int `json:"context_tokens"`
	// Reread is the tokens the server re-read beyond the new suffix in
	// the last turn; Cached what it reused.
	Reread         int    `json:"last_turn_reread"`
	Cached         int    `json:"last_turn_cached"`
	TodayPrefillUS int64  `json:"today_prefill_us"`
	Approvals      []Call `json:"pending_approvals"`
	ApprovalsErr   string `json:"approvals_error"`
	// Allowances are the owner's session allowances in force.
	Allowances    []Allowance `json:"allowances"`
	AllowancesErr string      `json:"allowances_error"`
	Fleet         string      `json:"fleet"`
	AnchorAge     string      `json:"audit_anchor_age"`
	Jobs          []Job       `json:"jobs"`
	JobsErr       string      `json:"jobs_error"`
}

// Role is one role's socket.
type Role struct {
	Name    string `json:"name"`
	Up      bool   `json:"up"`
	Version string `json:"version"` // from the listener's binary, when bxctl may read it
	Detail  string `json:"detail"`
}

// Call is one pending approval.
type Call struct {
	ID      int64  `json:"id"`
	Session string `json:"session"`
	Tool    string `json:"tool"`
	Expires string `json:"expires"`
}

// Allowance is one session allowance in force.
type Allowance struct {
	ID      int64  `json:"id"`
	Session string `json:"session"`
	Tool    string `json:"tool"`
	Scope   string `json:"scope"`
	Expires string `json:"expires"`
}

// Job is one job's next run.
type Job struct {
	Name string `json:"name"`
	Next string `json:"next"`
}

// roleSockets is the socket that shows each role is up: one it listens
// on that bxctl may connect to.
var roleSockets = []struct {
	role string
	s    *wire.Socket
}{{"inferproxy", &wire.Infer}, {"memoryd", &wire.Memadmin}, {"brokerd", &wire.Admin}, {"loopd", &wire.Loop}, {"gatewayd", &wire.Gateway}}

// Run gathers the status under o's bounds. Every item is gathered at
// once; one that misses the total says so.
func Run(ctx context.Context, o Options) *Status {
	ctx, cancel := context.WithTimeout(ctx, o.Total)
	defer cancel()
	st := &Status{Roles: make([]Role, len(roleSockets)), Fleet: "did not answer within " + o.Total.String(),
		AnchorAge: "none", Approvals: []Call{}, Allowances: []Allowance{}, Jobs: []Job{}}
	var mu sync.Mutex // guards st while probes write it
	var wg sync.WaitGroup
	probe := func(f func(ctx context.Context)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, o.Probe)
			defer cancel()
			f(pctx)
		}()
	}
	for i, rs := range roleSockets {
		st.Roles[i] = Role{Name: rs.role, Detail: "did not answer within " + o.Probe.String()}
		probe(func(ctx context.Context) {
			r := dialRole(ctx, layout.Socket(o.State, rs.s), rs.role)
			mu.Lock()
			st.Roles[i] = r
			mu.Unlock()
		})
	}
	probe(func(ctx context.Context) {
		list, err := rpc.Ask[*wire.Approvals](ctx, &wire.Admin, layout.Socket(o.State, &wire.Admin), &wire.ListApprovals{})
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			st.ApprovalsErr = escape.Line(err.Error())
			return
		}
		for _, c := range list.Calls {
			st.Approvals = append(st.Approvals, Call{ID: c.ID, Session: escape.Line(c.Session), Tool: escape.Line(c.Tool), Expires: escape.Line(c.Expires)})
		}
	})
	probe(func(ctx context.Context) {
		list, err := rpc.Ask[*wire.Allowances](ctx, &wire.Admin, layout.Socket(o.State, &wire.Admin), &wire.ListAllowances{})
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			st.AllowancesErr = escape.Line(err.Error())
			return
		}
		for _, a := range list.Allowances {
			st.Allowances = append(st.Allowances, Allowance{ID: a.ID, Session: escape.Line(a.Session), Tool: escape.Line(a.Tool), Scope: escape.Line(a.Scope), Expires: escape.Line(a.Expires)})
		}
	})
	probe(func(ctx context.Context) {
		f, err := rpc.Ask[*wire.FleetState](ctx, &wire.Memadmin, layout.Socket(o.State, &wire.Memadmin), &wire.FleetStatus{})
		mu.Lock()
		defer mu.Unlock()
		st.Fleet = fleetText(f, err)
	})
	probe(func(ctx context.Context) {
		list, err := rpc.Ask[*wire.JobList](ctx, &wire.Loop, layout.Socket(o.State, &wire.Loop), &wire.ListJobs{})
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			st.JobsErr = escape.Line(err.Error())
			return
		}
		for _, j := range list.Jobs {
			st.Jobs = append(st.Jobs, Job{Name: escape.Line(j.Name), Next: escape.Line(j.Next)})
		}
	})
	cfg := loopConfig(o.State)
	st.Model, st.Slot = escape.Line(cfg.Model.Name), cfg.Model.MainSlot
	st.Server = "inferproxy.toml names no upstream"
	if up := inferUpstream(o.State); up != "" {
		st.Server = "did not answer within " + o.Probe.String()
		probe(func(ctx context.Context) {
			n, msg := slotContext(ctx, up, cfg.Model.Name, cfg.Model.MainSlot, o.Probe)
			mu.Lock()
			defer mu.Unlock()
			st.SlotContext, st.Server = n, msg
		})
	}
	// The logs are read under the total bound too: a session log of
	// many megabytes must not hold the answer past it.
	st.Session = "not read within " + o.Total.String()
	probeLogs := func() {
		var local Status
		local.session(o)
		mu.Lock()
		defer mu.Unlock()
		st.Session, st.Epoch, st.Compactions, st.Turn = local.Session, local.Epoch, local.Compactions, local.Turn
		st.ContextTokens, st.Cached, st.Reread, st.TodayPrefillUS = local.ContextTokens, local.Cached, local.Reread, local.TodayPrefillUS
	}
	wg.Add(1)
	go func() { defer wg.Done(); probeLogs() }()
	st.anchor(o)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	out := *st // a copy: a probe that missed the total may still write st
	out.Roles = append([]Role(nil), st.Roles...)
	out.Approvals = append([]Call{}, st.Approvals...)
	out.Allowances = append([]Allowance{}, st.Allowances...)
	out.Jobs = append([]Job{}, st.Jobs...)
	return &out
}

// dialRole connects to a role's socket: up if it accepts; its version
// from the listening process's binary (SO_PEERCRED's pid), when this
// user may read it.
func dialRole(ctx context.Context, path, role string) Role {
	r := Role{Name: role}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		r.Detail = "down: " + err.Error()
		return r
	}
	defer c.Close()
	r.Up, r.Detail, r.Version = true, "accepts on "+filepath.Base(path), "unknown"
	if uc, ok := c.(*net.UnixConn); ok {
		r.Version = procinfo.VersionOf(procinfo.PeerPID(uc))
	}
	return r
}

func fleetText(f *wire.FleetState, err error) string {
	switch {
	case err != nil:
		return "memoryd: " + escape.Line(err.Error())
	case !f.Configured:
		return "not configured (memory is local only)"
	case f.LastError != "":
		return fmt.Sprintf("outbox %d pending; Honcho's last answer: %s (next try %s)", f.Pending, escape.Line(f.LastError), escape.Line(f.NextTry))
	}
	return fmt.Sprintf("outbox %d pending, %d sent; Honcho's last answer: ok", f.Pending, f.Sent)
}

// loopConfig is loopd.toml as loopd's own loader reads it; the zero
// Config if loopd would refuse it (status then names no model).
func loopConfig(state string) loopd.Config {
	path := layout.ConfigPath(state, layout.Loopd)
	if b, err := os.ReadFile(path); err == nil {
		if c, _, err := loopd.Parse(b, path, state); err == nil {
			return c
		}
	}
	return loopd.Config{}
}

// inferUpstream is inferproxy.toml's upstream, as inferproxy's own
// loader reads it; "" if inferproxy would refuse the file.
func inferUpstream(state string) string {
	path := layout.ConfigPath(state, layout.Inferproxy)
	if b, err := os.ReadFile(path); err == nil {
		if c, _, err := inferproxy.Parse(b, path, state); err == nil {
			return c.Upstream
		}
	}
	return ""
}

// slotContext asks llama-server's /props for the context per slot.
func slotContext(ctx context.Context, upstream, model string, slot int, probe time.Duration) (int, string) {
	c, err := llama.New(llama.Config{BaseURL: "http://" + upstream, Model: model, IDSlot: slot, IdleTimeout: 2 * probe})
	if err != nil {
		return 0, err.Error()
	}
	p, err := c.Props(ctx)
	if err != nil && ctx.Err() != nil {
		return 0, "llama-server at " + upstream + " did not answer within " + probe.String()
	}
	if err != nil {
		return 0, "llama-server at " + upstream + ": " + escape.Line(err.Error())
	}
	return p.SlotContext(), "llama-server at " + upstream + " answers"
}

// session reads the session's logs: epoch, compactions, the last turn's
// usage; and today's prefill time over every log.
func (st *Status) session(o Options) {
	files, _ := sessionlog.Files(layout.Sessions.In(o.State))
	id, newest := o.Session, time.Time{}
	if id == "" {
		for _, f := range files {
			if fi, err := os.Stat(f); err == nil && fi.ModTime().After(newest) {
				newest, id = fi.ModTime(), filepath.Base(filepath.Dir(f))
			}
		}
	}
	st.Session = escape.Line(id)
	var mine []string
	for _, f := range files {
		if filepath.Base(filepath.Dir(f)) == id {
			mine = append(mine, f)
		}
	}
	sort.Slice(mine, func(i, j int) bool {
		_, a, _ := sessionlog.Name(mine[i])
		_, b, _ := sessionlog.Name(mine[j])
		return a < b
	})
	if len(mine) > 0 {
		_, st.Epoch, _ = sessionlog.Name(mine[len(mine)-1])
		st.Compactions = int64(len(mine) - 1)
		var turnGap int
		sessionlog.Scan(mine[len(mine)-1], func(_ int, r sessionlog.Record, _ sessionlog.Trust) error {
			if u, ok := r.(*sessionlog.Usage); ok {
				if u.Turn != st.Turn {
					st.Turn, turnGap = u.Turn, 0
				}
				turnGap += max(u.CacheGap, 0)
				st.ContextTokens, st.Cached, st.Reread = u.CacheN+u.PromptN+u.PredictedN, u.CacheN, turnGap
			}
			return nil
		})
	}
	y, m, d := o.Now.UTC().Date()
	if r, err := report.Collect(o.State, time.Date(y, m, d, 0, 0, 0, 0, time.UTC)); err == nil {
		st.TodayPrefillUS = r.PrefillUS
	}
}

// anchor is the age of the owner's newest anchor of the audit log.
func (st *Status) anchor(o Options) {
	if o.Anchors == nil {
		return
	}
	dir := layout.Audit.In(o.State)
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		dir = r
	}
	as, err := o.Anchors(dir)
	if err != nil {
		st.AnchorAge = "anchors unreadable: " + escape.Line(err.Error())
		return
	}
	var newest time.Time
	for _, a := range as {
		if t, err := time.Parse(audit.TimeLayout, a.Time); err == nil && t.After(newest) {
			newest = t
		}
	}
	if !newest.IsZero() {
		st.AnchorAge = o.Now.Sub(newest).Truncate(time.Minute).String()
	}
}
