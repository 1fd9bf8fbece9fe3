package policy

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/tool/grant"
)

var (
	propCases = flag.Int("cases", 10000, "number of random cases in TestPropertyAgainstOracle")
	propSeed  = flag.Uint64("seed", 0, "seed for TestPropertyAgainstOracle (0: from the clock)")
)

// The oracle below restates the rules in the package doc as directly as
// possible, on its own plain representation, and shares no code with the
// implementation: no toolargs, no hostrule, no grant matching. Classes
// are 1 (public) to 3 (secret); modes are ranked deny 0, ask 1, auto 2.

type oGrant struct {
	id, tool, mode    string
	paths, hosts      []string
	maxTaint, class   int
	untrusted, rw     bool
	expires           *time.Time
	setClass, setUntr bool // written in the file (else defaults)
	setRW             bool
}

type oReq struct {
	tool    string
	path    string // read_file, write_file, shell
	host    string // http_fetch (as written in the URL)
	viaCall bool
}

type oWant struct {
	kind, reason, winner string // kind: auto, ask, deny
	class                int
	untrusted            bool
	mount                string
	rw                   bool
	host                 string
	expired, above       int
}

var modeRank = map[string]int{"deny": 0, "ask": 1, "auto": 2}

// validHosts are the hand-labelled valid names of the vocabulary below,
// in lowercase; every other host in it is invalid.
var validHosts = map[string]bool{"a.com": true, "b.com": true, "x.a.com": true, "c.org": true}

func under(a, root string) bool {
	if root == "/" {
		return true
	}
	return a == root || strings.HasPrefix(a, root+"/")
}

func validPath(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	if p == "/" {
		return true
	}
	for _, c := range strings.Split(p[1:], "/") {
		if c == "" || c == "." || c == ".." || strings.ContainsAny(c, ":,") {
			return false
		}
	}
	return true
}

func oracle(grants []oGrant, valid bool, r oReq, taint int, now time.Time) oWant {
	switch r.tool {
	case "recall", "ask_memory", "memory":
		return oWant{kind: "auto", winner: "", class: 2}
	}
	if !valid {
		return oWant{kind: "deny", reason: "grants_invalid"}
	}
	if r.tool != "read_file" && r.tool != "write_file" && r.tool != "shell" && r.tool != "http_fetch" {
		return oWant{kind: "deny", reason: "unknown_tool"}
	}
	host := strings.ToLower(r.host)
	if r.tool == "http_fetch" && !validHosts[host] || r.tool != "http_fetch" && !validPath(r.path) {
		return oWant{kind: "deny", reason: "invalid_arguments"}
	}
	if taint == 0 {
		taint = 3
	}
	taint = max(taint, 2)
	type oHit struct {
		g            oGrant
		length, clen int // longest matched path; longest covering path
		covers       bool
	}
	var hits []oHit
	var w oWant
	for _, g := range grants {
		if g.tool != r.tool {
			continue
		}
		length, clen, covers, ok := 0, 0, false, false
		for _, p := range g.paths {
			m, c := false, false
			switch r.tool {
			case "read_file":
				m, c = under(r.path, p), true
			case "write_file":
				m, c = under(r.path, p) && (r.path != p || g.mode == "deny"), true
			case "shell":
				m, c = under(r.path, p) || under(p, r.path), under(r.path, p)
			}
			if m {
				ok, covers, length = true, covers || c, max(length, len(p))
				if c {
					clen = max(clen, len(p))
				}
			}
		}
		if r.tool == "http_fetch" {
			ok, covers = slices.Contains(g.hosts, host), true
		}
		switch {
		case !ok:
		case g.expires != nil && !now.Before(*g.expires):
			w.expired++
		case taint > g.maxTaint:
			w.above++
		default:
			hits = append(hits, oHit{g, length, clen, covers})
		}
	}
	if len(hits) == 0 {
		w.kind, w.reason = "deny", "no_grant"
		return w
	}
	best := hits[0]
	for _, h := range hits[1:] {
		hr, br := modeRank[h.g.mode], modeRank[best.g.mode]
		if hr < br || hr == br && (h.length > best.length || h.length == best.length && h.g.id < best.g.id) {
			best = h
		}
	}
	w.winner = best.g.id
	if best.g.mode == "deny" {
		w.kind, w.reason = "deny", "denied_by_grant"
		return w
	}
	anyCovers := false
	w.class, w.rw = 1, true
	for _, h := range hits {
		anyCovers = anyCovers || h.covers
		w.class = max(w.class, h.g.class)
		w.untrusted = w.untrusted || h.g.untrusted
		w.rw = w.rw && h.g.rw
	}
	if !anyCovers {
		return oWant{kind: "deny", reason: "no_grant", expired: w.expired, above: w.above}
	}
	// The winner is chosen among the covering grants only (review item 5).
	var win *oHit
	for i := range hits {
		h := &hits[i]
		if !h.covers {
			continue
		}
		if win == nil {
			win = h
			continue
		}
		hr, br := modeRank[h.g.mode], modeRank[win.g.mode]
		if hr < br || hr == br && (h.clen > win.clen || h.clen == win.clen && h.g.id < win.g.id) {
			win = h
		}
	}
	w.winner = win.g.id
	w.kind, w.expired, w.above = best.g.mode, 0, 0 // counts explain denials only
	switch r.tool {
	case "read_file":
		w.mount, w.rw = r.path, false
	case "write_file":
		w.mount, w.rw = r.path[:strings.LastIndex(r.path, "/")], true
		if w.mount == "" {
			w.mount = "/"
		}
	case "shell":
		w.mount = r.path
	case "http_fetch":
		w.host, w.rw = host, false
	}
	return w
}

// got reduces the implementation's answer to the oracle's shape.
func got(d Decision, a *Ask, n *Denial) oWant {
	var w oWant
	var mounts []Mount
	switch {
	case n != nil:
		w = oWant{kind: "deny", reason: string(n.Reason), expired: n.Expired, above: n.AboveTaint}
		if n.Grant != nil {
			w.winner = n.Grant.ID
		}
		return w
	case a != nil:
		w = oWant{kind: "ask", winner: a.Grant.ID, class: int(a.Class), untrusted: a.Untrusted}
		mounts = a.Mounts
		if len(a.Hosts) == 1 {
			w.host = a.Hosts[0].String()
		}
	default:
		w = oWant{kind: d.Mode().String(), winner: d.Grant().ID, class: int(d.Class()), untrusted: d.Untrusted()}
		mounts = d.Mounts()
		if hs := d.Hosts(); len(hs) == 1 {
			w.host = hs[0].String()
		}
	}
	if len(mounts) == 1 {
		w.mount, w.rw = mounts[0].Path.String(), mounts[0].Writable
	}
	return w
}

func TestPropertyAgainstOracle(t *testing.T) {
	seed := *propSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	start := time.Now()
	counts := map[string]int{}
	for i := range *propCases {
		focus := tools[rng.IntN(len(tools))]
		grants, valid := genGrants(rng, focus)
		r, sess := genReq(rng, focus, grants), Session{Taint: dataclass.Class(rng.IntN(4)), Untrusted: rng.IntN(2) == 0}
		want := oracle(grants, valid, r, int(sess.Taint), now)
		gs := build(t, grants, valid)
		wire := wireReq(r)
		d, a, n := Decide(gs, wire, sess, now)
		have := got(d, a, n)
		if have != want {
			t.Fatalf("case %d (seed %d): %+v under taint %v\ngrants %s\n got %+v\nwant %+v", i, seed, r, sess.Taint, dump(grants, valid), have, want)
		}
		counts[want.kind+" "+want.reason]++
		if want.kind == "deny" {
			continue
		}
		rd, rn := Redecide(gs, wire, sess, now)
		if rn != nil || !rd.Valid() || !rd.Approved() || got(rd, nil, nil) != want && !(want.kind == "ask" && got(rd, nil, nil) == have) {
			t.Fatalf("case %d (seed %d): Redecide disagrees with Decide: %+v, %v", i, seed, got(rd, nil, nil), rn)
		}
	}
	t.Logf("%d cases, seed %d, %v: %v", *propCases, seed, time.Since(start).Round(time.Millisecond), counts)
	for _, k := range []string{"auto ", "ask ", "deny no_grant", "deny denied_by_grant", "deny invalid_arguments", "deny grants_invalid", "deny unknown_tool"} {
		if *propCases >= 10000 && counts[k] < *propCases/200 {
			t.Errorf("outcome %q came up %d times in %d cases: the generator no longer exercises it", k, counts[k], *propCases)
		}
	}
}

var (
	tools     = []string{"read_file", "write_file", "shell", "http_fetch"}
	pathParts = []string{"a", "ab", "b"}
	hostVocab = []string{"a.com", "b.com", "x.a.com"}
	reqHosts  = []string{"a.com", "A.COM", "b.com", "x.a.com", "c.org", "127.0.0.1", "a.com.", "com"}
	reqParts  = []string{"a", "ab", "b", "a", "b", "c", "..", ".", "", "x:y"}
)

func genPath(rng *rand.Rand, parts []string, minDepth, maxDepth int) string {
	n := minDepth + rng.IntN(maxDepth-minDepth+1)
	var els []string
	for range n {
		els = append(els, parts[rng.IntN(len(parts))])
	}
	return "/" + strings.Join(els, "/")
}

// genGrants makes up to five grants, most of them for the focus tool so
// that they overlap.
func genGrants(rng *rand.Rand, focus string) ([]oGrant, bool) {
	ids := []string{"a", "b", "c", "d", "e", "f"}
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	var gs []oGrant
	for i := range rng.IntN(6) {
		tool := focus
		if rng.IntN(4) == 0 {
			tool = tools[rng.IntN(len(tools))]
		}
		g := oGrant{id: ids[i], tool: tool, mode: []string{"deny", "ask", "auto"}[rng.IntN(3)],
			maxTaint: 2 + rng.IntN(2), class: 2, untrusted: true}
		if g.mode == "deny" {
			g.maxTaint = 3
		}
		if rng.IntN(2) == 0 {
			g.class, g.setClass = 1+rng.IntN(3), true
		}
		if rng.IntN(2) == 0 {
			g.untrusted, g.setUntr = rng.IntN(2) == 0, true
		}
		if g.tool == "shell" && rng.IntN(2) == 0 {
			g.rw, g.setRW = rng.IntN(2) == 0, true
		}
		switch rng.IntN(8) {
		case 1:
			e := now.Add(-time.Hour)
			g.expires = &e
		case 2:
			e := now
			g.expires = &e
		case 3:
			e := now.Add(time.Second)
			g.expires = &e
		}
		for range 1 + rng.IntN(2) {
			if g.tool == "http_fetch" {
				if h := hostVocab[rng.IntN(len(hostVocab))]; !slices.Contains(g.hosts, h) {
					g.hosts = append(g.hosts, h)
				}
			} else if p := genPath(rng, pathParts, 1, 3); !slices.Contains(g.paths, p) {
				g.paths = append(g.paths, p)
			}
		}
		gs = append(gs, g)
	}
	return gs, rng.IntN(20) != 0
}

// genReq makes a request, usually for the focus tool and often near a
// grant's path: under it, at it, or above it.
func genReq(rng *rand.Rand, focus string, gs []oGrant) oReq {
	r := oReq{viaCall: rng.IntN(5) == 0}
	switch k := rng.IntN(20); {
	case k == 0:
		r.tool = []string{"recall", "ask_memory", "memory"}[rng.IntN(3)]
	case k == 1:
		r.tool = "exec"
	case k < 5:
		r.tool = tools[rng.IntN(len(tools))]
	default:
		r.tool = focus
	}
	var near []string
	for _, g := range gs {
		near = append(near, g.paths...)
	}
	switch {
	case r.tool == "http_fetch":
		r.host = reqHosts[rng.IntN(len(reqHosts))]
	case rng.IntN(5) == 0:
		r.path = genPath(rng, reqParts, 0, 4)
	case len(near) > 0 && rng.IntN(3) > 0:
		r.path = near[rng.IntN(len(near))]
		switch rng.IntN(4) {
		case 0:
			if i := strings.LastIndex(r.path, "/"); i > 0 {
				r.path = r.path[:i]
			}
		case 1, 2:
			r.path += genPath(rng, pathParts, 1, 2)
		}
	default:
		r.path = genPath(rng, pathParts, 0, 4)
	}
	return r
}

// build makes the implementation's grant set from the oracle's grants,
// through the same Spec a grant file decodes into.
func build(t *testing.T, gs []oGrant, valid bool) *grant.Set {
	if !valid {
		return nil
	}
	classes := []string{"", "public", "private", "secret"}
	var out []grant.Grant
	for _, g := range gs {
		s := grant.Spec{ID: g.id, Tool: g.tool, Mode: g.mode, MaxTaint: classes[g.maxTaint], Paths: g.paths, Hosts: g.hosts}
		if g.setClass {
			s.ResultClass = classes[g.class]
		}
		if g.setUntr {
			s.Untrusted = &g.untrusted
		}
		if g.setRW {
			s.Writable = &g.rw
		}
		if g.expires != nil {
			s.Expires = g.expires.Format(time.RFC3339)
		}
		pg, err := grant.New("prop.toml", s)
		if err != nil {
			t.Fatalf("generated grant %+v: %v", g, err)
		}
		out = append(out, pg)
	}
	set, err := grant.NewSet(out...)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func wireReq(r oReq) Request {
	var args any
	switch r.tool {
	case "http_fetch":
		args = map[string]string{"url": "https://" + r.host + "/p"}
	case "write_file":
		args = map[string]string{"path": r.path, "content": "c"}
	case "shell":
		args = map[string]string{"command": "true", "workdir": r.path}
	case "recall", "ask_memory", "memory", "exec":
		args = map[string]string{"q": r.path}
	default:
		args = map[string]string{"path": r.path}
	}
	b, _ := json.Marshal(args)
	if r.viaCall {
		b, _ = json.Marshal(map[string]any{"name": r.tool, "arguments": json.RawMessage(b)})
		return Request{Tool: "call_tool", Arguments: b}
	}
	return Request{Tool: r.tool, Arguments: b}
}

func dump(gs []oGrant, valid bool) string {
	if !valid {
		return "(invalid set)"
	}
	var b strings.Builder
	for _, g := range gs {
		exp := "never"
		if g.expires != nil {
			exp = g.expires.Sub(now).String()
		}
		fmt.Fprintf(&b, "\n  %s %s %s paths=%v hosts=%v max=%d class=%d untrusted=%v rw=%v expires=%s",
			g.id, g.tool, g.mode, g.paths, g.hosts, g.maxTaint, g.class, g.untrusted, g.rw, exp)
	}
	return b.String()
}
