package runner

import (
	"bytes"
	"log/slog"
	"sync"
)

// Bounds on what one egress proxy may put in brokerd's log.
const (
	maxDecisionLine  = 4 << 10
	maxDecisionLines = 1000
)

// decisionLog logs the egress proxy's decision lines (its stderr) as they
// arrive, one log record a line, so that a call's network decisions are
// on record while it runs and survive a brokerd that dies mid-call
// (review 18). A line past maxDecisionLine is cut; past maxDecisionLines
// lines, one more record says the rest were dropped.
type decisionLog struct {
	mu      sync.Mutex
	log     *slog.Logger
	buf     []byte
	long    bool // the current line was cut
	lines   int
	dropped bool
}

func newDecisionLog(log *slog.Logger) *decisionLog { return &decisionLog{log: log} }

func (d *decisionLog) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if room := maxDecisionLine - len(d.buf); len(chunk) > room {
			d.buf = append(d.buf, chunk[:room]...)
			d.long = true
		} else {
			d.buf = append(d.buf, chunk...)
		}
		if i < 0 {
			break
		}
		d.emit()
		p = p[i+1:]
	}
	return n, nil
}

// Flush logs a last line that had no newline.
func (d *decisionLog) Flush() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.buf) > 0 {
		d.emit()
	}
}

// emit logs the buffered line; d.mu is held.
func (d *decisionLog) emit() {
	line, long := string(d.buf), d.long
	d.buf, d.long = d.buf[:0], false
	if line == "" {
		return
	}
	d.lines++
	switch {
	case d.lines <= maxDecisionLines:
		d.log.Info("egress proxy", "decision", line, "cut", long)
	case !d.dropped:
		d.dropped = true
		d.log.Warn("egress proxy: further decisions of this call are not logged", "limit", maxDecisionLines)
	}
}
