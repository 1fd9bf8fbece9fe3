package audit

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Problem is the first thing wrong with a log: a break in the chain, a
// damaged last line, or a file that could not be read.
type Problem struct {
	File   string // base name of the log file; "" when the directory is the problem
	Line   int    // 1-based line in File; 0 when the file as a whole is the problem
	Seq    int64  // the line's position in the log (the seq it must carry)
	Reason string
	// LastGood is the hex hash of the line just before the broken one
	// (Genesis at the start of the log): what an [AcceptedBreak] must name.
	LastGood string
	// Recoverable marks the last line of the log, torn or unparseable,
	// with no break before it. It is not a break to accept: the next
	// [Open] appends a [Recovery] describing it.
	Recoverable bool
	// Unreadable means a file or the directory could not be read, so
	// nothing is known about the chain from here on.
	Unreadable bool
}

// Where is "file:line", or less when the problem is not one line.
func (p *Problem) Where() string {
	switch {
	case p.File == "":
		return ""
	case p.Line == 0:
		return p.File
	}
	return fmt.Sprintf("%s:%d", p.File, p.Line)
}

// Error is "file:line: reason; see docs/runbook.md#<entry>".
func (p *Problem) Error() string {
	s := p.Reason
	if w := p.Where(); w != "" {
		s = w + ": " + s
	}
	switch {
	case p.Unreadable:
		return s + "; see docs/runbook.md#audit-unreadable"
	case p.Recoverable:
		return s + "; see docs/runbook.md#audit-torn"
	}
	return s + "; see docs/runbook.md#audit-chain-broken"
}

// Accepted is a break that an [AcceptedBreak] record accepted.
type Accepted struct {
	File string // the break's file
	Line int    // and line
	At   string // "file:line" of the accepted_break record
}

// Report is what [Verify] found.
type Report struct {
	Files   int    // log files read
	Records int64  // lines verified as records (not damaged, not in an accepted break)
	LastSeq int64  // lines in the log: the seq of the last one
	Head    string // hex hash of the last line; Genesis for an empty log
	// Problem is the first unaccepted break, or nil when the log is intact.
	Problem   *Problem
	Accepted  []Accepted // breaks the owner accepted, in order
	Recovered []string   // "file:line" of each damaged line a recovery describes
	// Unfinished lists the seq of each allowed call (allowed when
	// decided, or approved) with no result: it ran and its result was
	// never recorded, or it is running now. Not a break.
	Unfinished []int64
	// Abandoned lists the seq of each ask decision with no approval
	// record: never answered, or still pending. Not a break.
	Abandoned []int64
}

// OK reports whether the log is intact.
func (r Report) OK() bool { return r.Problem == nil }

// Summary is one line: the counts and head hash, or the first problem.
func (r Report) Summary() string {
	if r.Problem != nil {
		return r.Problem.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "audit log intact: %d files, %d records, last seq %d, head %s", r.Files, r.Records, r.LastSeq, r.Head)
	if n := len(r.Accepted); n > 0 {
		fmt.Fprintf(&b, "; %d accepted breaks (first %s:%d)", n, r.Accepted[0].File, r.Accepted[0].Line)
	}
	if n := len(r.Recovered); n > 0 {
		fmt.Fprintf(&b, "; %d recovered lines (first %s)", n, r.Recovered[0])
	}
	list := func(what string, seqs []int64) {
		if len(seqs) == 0 {
			return
		}
		shown := seqs[:min(len(seqs), 10)]
		fmt.Fprintf(&b, "; %d %s (seq %s", len(seqs), what, strings.Trim(fmt.Sprint(shown), "[]"))
		if len(shown) < len(seqs) {
			b.WriteString(" ...")
		}
		b.WriteString(")")
	}
	list("allowed calls with no result", r.Unfinished)
	list("ask decisions with no answer", r.Abandoned)
	return b.String()
}

// Verify checks the whole log in dir. It only reads: it is a pure function
// of the files, shared by brokerd and `bxctl audit verify`.
func Verify(dir string) Report {
	files, err := listLogs(dir)
	if err != nil {
		return Report{Head: Genesis, Problem: &Problem{Reason: err.Error(), Unreadable: true}}
	}
	v := newVerifier()
	v.files = len(files)
	v.run(&source{dir: dir, files: files})
	return v.report()
}

// waiting is what a tracked decision still expects.
type waiting uint8

const (
	wantAnswer waiting = iota + 1 // an ask decision awaiting its approval record
	wantResult                    // an allowed call awaiting its result
)

func (w waiting) String() string {
	if w == wantAnswer {
		return "an ask decision awaiting an answer"
	}
	return "an allowed call awaiting its result"
}

// span is a range of positions [lo, hi) whose records were not tracked:
// lines a resumed check skipped, or a break the owner accepted.
type span struct{ lo, hi int64 }

// verifier walks the log line by line. Every line advances pos and prev,
// whatever it holds, since the next line's seq and prev are counted from
// lines, not read from them.
type verifier struct {
	// startFile is set for a resumed check (an ordinary writer start):
	// files before it were not read, and an accepted_break naming one of
	// them is taken as the full check would take it.
	startFile string

	pos    int64             // position of the last line seen
	prev   [32]byte          // its hash; all zeros (Genesis) before any line
	last   *line             // the last line seen
	region *Problem          // open failed region: the first unaccepted break
	open   map[int64]waiting // decisions still expecting a record
	gaps   []span
	// strict is set for a writer's own appends: a reference it cannot
	// check is refused rather than taken on trust.
	strict bool

	files     int
	records   int64
	accepted  []Accepted
	recovered []string

	// kept holds the hash of each line whose position [verifier.keep]
	// named (the head's, the anchors'), once it is seen.
	want map[int64]bool
	kept map[int64][32]byte
}

func newVerifier() *verifier { return &verifier{open: map[int64]waiting{}} }

// keep asks for the hash of the line at pos, for the head and anchors.
func (v *verifier) keep(pos int64) {
	if v.want == nil {
		v.want, v.kept = map[int64]bool{}, map[int64][32]byte{}
	}
	v.want[pos] = true
	if v.last != nil && v.last.pos == pos {
		v.kept[pos] = v.last.sum // a resumed check's seed line
	}
}

// hashAt is the hash of the kept line at pos.
func (v *verifier) hashAt(pos int64) (string, bool) {
	sum, ok := v.kept[pos]
	return hashHex(sum), ok
}

// run processes every line from src, one line behind the reader so that
// each line is judged knowing whether a recovery follows it.
func (v *verifier) run(src *source) {
	defer src.close()
	// A resumed check starts after a seed line that parses, in an older
	// file: no recovery can describe it (recoveryMismatch), so none is
	// looked for.
	cur, err := src.read()
	for err == nil && cur != nil {
		var nxt *line
		nxt, err = src.read()
		if err != nil {
			break
		}
		v.process(cur, nxt)
		cur = nxt
	}
	if err != nil && v.region == nil {
		v.region = &Problem{File: src.name, Reason: err.Error(), Unreadable: true}
	}
}

// process judges cur; nxt is the line after it, nil at the end of the log.
func (v *verifier) process(cur, nxt *line) {
	defer v.advance(cur)
	if v.region != nil {
		v.inRegion(cur)
		return
	}
	if nxt != nil && recoveryMismatch(nxt, cur) == "" {
		// Recovered whether or not it parses: a record cut exactly
		// before its newline parses, and is still damage.
		v.recovered = append(v.recovered, cur.where())
		return
	}
	if p, damaged := v.check(cur); p != nil {
		p.Recoverable = damaged && nxt == nil
		v.region = p
		return
	}
	v.apply(cur)
}

func (v *verifier) advance(l *line) {
	v.pos, v.prev, v.last = l.pos, l.sum, l
	if v.want[l.pos] {
		v.kept[l.pos] = l.sum
	}
}

// ends is what the head judgment needs of the log as verified so far.
func (v *verifier) ends() LogEnd {
	return LogEnd{Pos: v.pos, Last: hashHex(v.prev), At: v.hashAt,
		Damaged: v.region != nil && v.region.Recoverable}
}

func (v *verifier) problem(l *line, format string, args ...any) *Problem {
	return &Problem{File: l.file, Line: l.n, Seq: l.pos, Reason: fmt.Sprintf(format, args...), LastGood: hashHex(v.prev)}
}

// check judges one line outside a failed region. damaged reports a torn
// or unparseable line, which a recovery can describe.
func (v *verifier) check(l *line) (p *Problem, damaged bool) {
	if l.torn {
		return v.problem(l, "torn line: no final newline (a write was cut short), and no recovery follows it"), true
	}
	rec, err := l.parse()
	if err != nil {
		return v.problem(l, "does not parse: %v", err), true
	}
	h := rec.Head()
	if want := hashHex(v.prev); h.Prev != want {
		before := "the start of the log, which is " + Genesis
		if v.last != nil {
			before = "the line before, " + v.last.where() + ", which is " + want
		}
		return v.problem(l, "prev %s does not match the hash of %s (a line was changed, removed or inserted)", h.Prev, before), false
	}
	if h.Seq != l.pos {
		return v.problem(l, "seq %d, but this is line %d of the log", h.Seq, l.pos), false
	}
	switch r := rec.(type) {
	case *Approval:
		return v.checkRef(l, "approval", r.Decision, wantAnswer), false
	case *Result:
		return v.checkRef(l, "result", r.Decision, wantResult), false
	case *Recovery:
		// A recovery that matches the line before it has made process
		// skip that line; here it only has to match.
		why := "it is the first line of the log"
		if v.last != nil {
			why = recoveryMismatch(l, v.last)
		}
		if why != "" {
			return v.problem(l, "recovery describes no line: %s", why), false
		}
	case *AcceptedBreak:
		if !v.acceptsOlder(r) {
			return v.problem(l, "accepted_break names %s:%d, but the chain holds up to here: there is no break to accept", r.File, r.Line), false
		}
	}
	return nil, false
}

// checkRef checks that an approval or result answers a tracked decision
// awaiting it, or one whose record this check did not track.
func (v *verifier) checkRef(l *line, what string, seq int64, want waiting) *Problem {
	if w, ok := v.open[seq]; ok {
		if w == want {
			return nil
		}
		return v.problem(l, "%s names decision %d, which is %v", what, seq, w)
	}
	for _, g := range v.gaps {
		if g.lo <= seq && seq < g.hi {
			if v.strict {
				return v.problem(l, "%s names decision %d, whose record this writer did not track (it is in an older file, or inside an accepted break)", what, seq)
			}
			return nil
		}
	}
	return v.problem(l, "%s names decision %d, which is not %v", what, seq, want)
}

// acceptsOlder reports whether a resumed check takes ab as the full check
// would: it names a file this check did not read.
func (v *verifier) acceptsOlder(ab *AcceptedBreak) bool {
	return v.startFile != "" && ab.File < v.startFile
}

// apply records what a good line changes.
func (v *verifier) apply(l *line) {
	v.records++
	switch r := l.rec.(type) {
	case *Decision:
		switch r.Record.Outcome {
		case Allowed:
			v.open[r.Seq] = wantResult
		case Ask:
			v.open[r.Seq] = wantAnswer
		}
	case *Approval:
		delete(v.open, r.Decision)
		if r.Outcome == Allowed {
			v.open[r.Decision] = wantResult
		}
	case *Result:
		delete(v.open, r.Decision)
	case *AcceptedBreak:
		v.accepted = append(v.accepted, Accepted{File: r.File, Line: r.Line, At: l.where()})
		if v.acceptsOlder(r) {
			// The whole check was in a failed region from that older
			// break to here, tracking nothing: neither does this one.
			v.gaps = append(v.gaps, span{1, l.pos})
			maps.DeleteFunc(v.open, func(seq int64, _ waiting) bool { return seq < l.pos })
		}
	}
}

// inRegion looks, inside a failed region, for the accepted_break that
// closes it: one that names the break (file, line, last_good) and whose
// own seq and prev hold. Everything else in the region goes unchecked.
func (v *verifier) inRegion(l *line) {
	rec, err := l.parse()
	ab, ok := rec.(*AcceptedBreak)
	if err != nil || !ok || l.torn || ab.Seq != l.pos || ab.Prev != hashHex(v.prev) {
		return
	}
	names := ab.File == v.region.File && ab.Line == v.region.Line && ab.LastGood == v.region.LastGood
	if !names && !v.acceptsOlder(ab) {
		return
	}
	v.gaps = append(v.gaps, span{v.region.Seq, l.pos})
	v.region = nil
	v.apply(l)
}

// admit judges a line the writer is about to append: outside a failed
// region as check does; inside one (only AcceptBreak writes there) it
// allows a recovery and the accepted_break that names the break.
func (v *verifier) admit(l *line) *Problem {
	if v.region == nil {
		p, _ := v.check(l)
		return p
	}
	switch r := l.rec.(type) {
	case *Recovery:
		return nil
	case *AcceptedBreak:
		if r.File == v.region.File && r.Line == v.region.Line && r.LastGood == v.region.LastGood {
			return nil
		}
	}
	return v.region
}

// commit records a line the writer appended after admit allowed it.
func (v *verifier) commit(l *line) {
	if v.region != nil {
		v.inRegion(l)
	} else {
		v.apply(l)
	}
	v.advance(l)
}

// recoveryMismatch says why line r is not a recovery of line d, the line
// just before it; "" when it is one.
func recoveryMismatch(rl, d *line) string {
	rec, err := rl.parse()
	r, ok := rec.(*Recovery)
	if err != nil || !ok || rl.torn {
		return "not a recovery record"
	}
	if r.File != d.file || r.Line != d.n {
		return fmt.Sprintf("it names %s:%d, but the line before it is %s", r.File, r.Line, d.where())
	}
	if r.SHA256 != hashHex(d.sum) || r.Size != d.size {
		return fmt.Sprintf("its sha256 and size do not match %s (%d bytes, %s)", d.where(), d.size, hashHex(d.sum))
	}
	switch {
	case d.torn:
		if r.Damage != Torn || r.Action != NoAction {
			return fmt.Sprintf("%s has no final newline: want damage torn, action none", d.where())
		}
	case r.Action == EndedLine:
		if r.Damage != Torn || d.file != rl.file {
			return "ended_line recovers a torn line in the same file"
		}
	default:
		if _, err := d.parse(); r.Damage != Unparseable || err == nil {
			return fmt.Sprintf("%s is a complete line that parses: there is nothing to recover", d.where())
		}
	}
	return ""
}

func (v *verifier) report() Report {
	r := Report{
		Files: v.files, Records: v.records, LastSeq: v.pos, Head: hashHex(v.prev),
		Problem: v.region, Accepted: v.accepted, Recovered: v.recovered,
	}
	for seq, w := range v.open {
		if w == wantResult {
			r.Unfinished = append(r.Unfinished, seq)
		} else {
			r.Abandoned = append(r.Abandoned, seq)
		}
	}
	slices.Sort(r.Unfinished)
	slices.Sort(r.Abandoned)
	return r
}
