package policy

import (
	"cmp"
	"slices"
	"time"

	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/tool/grant"
	"wntrmute.dev/boxmaker/pkg/tool/hostrule"
	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
)

// verdict is a call's outcome when it is not denied.
type verdict struct {
	tool       string
	via        bool
	args       toolargs.Args
	mode       grant.Mode // auto or ask
	builtin    bool       // a memory tool, decided by rule 1
	winner     GrantRef
	matched    []GrantRef
	class      dataclass.Class
	untrusted  bool
	mounts     []Mount
	hosts      []hostrule.Name
	secret     string // the winning grant's secret name, or ""
	consult    *ConsultCall
	mcp        *MCPCall        // rule 11 (mcp.go)
	attachment *AttachmentRead // read_attachment's resolved read (attachment.go)
	session    Session
	at         time.Time
}

// hit is one applicable grant.
type hit struct {
	g      grant.Grant
	length int  // the longest matched grant path, in bytes; 0 for hosts
	clen   int  // the longest covering grant path (differs for shell)
	covers bool // false only for a shell grant matched by exposure
}

// constraint reports whether g's constraint matches a (rule 5), the
// longest matched path and the longest covering path.
func constraint(g grant.Grant, a toolargs.Args) (length, clen int, covers, ok bool) {
	switch a := a.(type) {
	case toolargs.PostFile:
		for _, p := range g.Paths() {
			if a.Path.Within(p) {
				length, covers, ok = max(length, len(p.String())), true, true
			}
		}
	case toolargs.ReadFile:
		for _, p := range g.Paths() {
			if a.Path.Within(p) && (!g.Standing() || a.Path == p) {
				length, covers, ok = max(length, len(p.String())), true, true
			}
		}
	case toolargs.WriteFile:
		for _, p := range g.Paths() {
			if a.Path.StrictlyWithin(p) || (g.Mode() == grant.Deny && a.Path == p) {
				length, covers, ok = max(length, len(p.String())), true, true
			}
		}
	case toolargs.Shell:
		for _, p := range g.Paths() {
			if a.Workdir.Within(p) {
				length, covers, ok = max(length, len(p.String())), true, true
				clen = max(clen, len(p.String()))
			} else if p.StrictlyWithin(a.Workdir) {
				length, ok = max(length, len(p.String())), true
			}
		}
		return length, clen, covers, ok
	case toolargs.HTTPFetch:
		ok, covers = hostrule.Allowed(a.URL.Host(), g.Hosts()), true
	case toolargs.MCP:
		// Every grant naming the tool applies: its paths and hosts are
		// what the container gets, not a constraint on the arguments.
		ok, covers = true, true
	case attachmentCall:
		for _, p := range g.Paths() {
			if a.path.Within(p) {
				length, covers, ok = max(length, len(p.String())), true, true
			}
		}
	}
	return length, length, covers, ok
}

// match applies rules 5 to 7 to the grants for a's tool.
func match(grants []grant.Grant, a toolargs.Args, sess Session, now time.Time) (*verdict, *Denial) {
	var hits []hit
	var expired, above int
	for _, g := range grants {
		if g.Tool() != a.Tool() {
			continue
		}
		length, clen, covers, ok := constraint(g, a)
		switch {
		case !ok:
		case !g.ActiveAt(now):
			expired++
		case !sess.Taint.AtMost(g.MaxTaint()):
			above++
		default:
			hits = append(hits, hit{g, length, clen, covers})
		}
	}
	noGrant := &Denial{Reason: NoGrant, Expired: expired, AboveTaint: above}
	if len(hits) == 0 {
		return nil, noGrant
	}
	mode, standing := grant.Auto, false
	for _, h := range hits {
		if h.g.Standing() {
			standing = true
			continue
		}
		mode = min(mode, h.g.Mode())
	}
	// A standing grant (the owner's standing approval of this exact file
	// or host) turns an ask into auto, and is then the winner; a deny
	// still wins over it.
	override := standing && mode == grant.Ask
	if override {
		mode = grant.Auto
	}
	// The winner, whose secret the call gets, is chosen among the grants
	// that cover the call: a shell grant matched only because the workdir
	// would expose its path lends its mode, class and flags, never its
	// secret. A deny is the exception: any applicable deny grant wins.
	eligible := func(h hit) bool {
		if override {
			return h.g.Standing()
		}
		return h.covers || mode == grant.Deny
	}
	winMode := grant.Auto
	for _, h := range hits {
		if eligible(h) && !(h.g.Standing() && !override) {
			winMode = min(winMode, h.g.Mode())
		}
	}
	var best *hit
	for i := range hits {
		h := &hits[i]
		if !eligible(*h) || h.g.Mode() != winMode {
			continue
		}
		hl, bl := h.clen, 0
		if mode == grant.Deny {
			hl = h.length
		}
		if best != nil {
			bl = best.clen
			if mode == grant.Deny {
				bl = best.length
			}
		}
		if best == nil || hl > bl || (hl == bl && h.g.ID() < best.g.ID()) {
			best = h
		}
	}
	matched := make([]GrantRef, len(hits))
	for i, h := range hits {
		matched[i] = ref(h.g)
	}
	slices.SortFunc(matched, func(x, y GrantRef) int { return cmp.Compare(x.ID, y.ID) })
	if mode == grant.Deny {
		w := ref(best.g)
		return nil, &Denial{Reason: DeniedByGrant, Grant: &w, Matched: matched, Expired: expired, AboveTaint: above}
	}
	if best == nil { // no grant covers the call
		noGrant.Matched = matched
		return nil, noGrant
	}
	v := &verdict{mode: mode, winner: ref(best.g), matched: matched, class: dataclass.Public, secret: best.g.Secret()}
	writable := true
	for _, h := range hits {
		v.class = dataclass.Join(v.class, h.g.ResultClass())
		v.untrusted = v.untrusted || h.g.Untrusted()
		writable = writable && h.g.Writable()
	}
	switch a := a.(type) {
	case toolargs.ReadFile:
		v.mounts = []Mount{{Path: a.Path}}
	case toolargs.WriteFile:
		v.mounts = []Mount{{Path: a.Path.Dir(), Writable: true}}
	case toolargs.Shell:
		v.mounts = []Mount{{Path: a.Workdir, Writable: writable}}
	case toolargs.HTTPFetch:
		v.hosts = []hostrule.Name{a.URL.Host()}
	case toolargs.MCP:
		// The winning grant's paths and hosts, and no other grant's.
		for _, p := range best.g.Paths() {
			v.mounts = append(v.mounts, Mount{Path: p, Writable: writable})
		}
		v.hosts = best.g.Hosts()
	case attachmentCall:
		v.attachment = &AttachmentRead{Path: a.path, Offset: a.Offset, Length: a.Length}
	}
	return v, nil
}

func ref(g grant.Grant) GrantRef {
	return GrantRef{ID: g.ID(), File: g.File(), SHA256: g.SHA256()}
}
