package gateway

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/gatewayd"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// delivery is gatewayd's durable record, per session it started, of the
// highest turn whose outcome it has posted, so that a turn that ends
// while gatewayd is down is posted when it starts again (loopd keeps the
// outcome; loop.sock's answers_since returns it). A session is recorded
// before its first message goes to loopd, so a turn started just before
// a crash is known. Each post of an outcome carries [PropTurn]; before
// posting one again gatewayd looks for it in the thread, so a crash
// between the post and the mark cannot post it twice. delivered.json is
// written like the cursor (temporary file, fsync, rename, directory
// fsync), decoded strictly, and refused if gatewayd's user does not own
// it or others may write it.
type delivery struct {
	path string

	mu    sync.Mutex // guards state and the file's writes
	state deliveryState
}

// deliveryState is delivered.json.
type deliveryState struct {
	Sessions []delivered `json:"sessions"` // least recently started first, at most maxDelivered
}

// delivered is one session's mark.
type delivered struct {
	Session string `json:"session"`
	Channel string `json:"channel"`
	Root    string `json:"root"`
	Turn    int64  `json:"turn"` // the highest turn whose outcome is posted
}

// maxDelivered bounds the sessions recorded: as many as the threads
// gatewayd remembers as its own; the oldest is forgotten.
const maxDelivered = maxMine

// PropTurn is the post prop naming the session, turn and part an
// answer post carries: "<session>:<turn>:<part>/<parts>".
const PropTurn = "boxmaker_turn"

func turnProp(session string, turn int64, part, parts int) string {
	return fmt.Sprintf("%s:%d:%d/%d", session, turn, part, parts)
}

// openDelivery reads delivered.json in dir; a missing file records no
// session.
func openDelivery(dir string) (*delivery, error) {
	d := &delivery{path: filepath.Join(dir, "delivered.json")}
	if err := readOwn(d.path, "deliveries", "gateway-delivered", &d.state); err != nil {
		return nil, err
	}
	if err := d.state.check(); err != nil {
		return nil, fmt.Errorf("read deliveries %s: not a record gatewayd wrote (%v); see docs/runbook.md#gateway-delivered", d.path, err)
	}
	return d, nil
}

func (s *deliveryState) check() error {
	if len(s.Sessions) > maxDelivered {
		return fmt.Errorf("%d sessions, over %d", len(s.Sessions), maxDelivered)
	}
	seen := map[string]bool{}
	for _, e := range s.Sessions {
		if wire.CheckSessionID(e.Session) != nil || e.Session != SessionPrefix+e.Root || !gatewayd.ValidID(e.Channel) || e.Turn < 0 || seen[e.Session] {
			return fmt.Errorf("bad entry %+v", e)
		}
		seen[e.Session] = true
	}
	return nil
}

// list returns a copy of the marks.
func (d *delivery) list() []delivered {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.state.Sessions)
}

// get returns session's mark.
func (d *delivery) get(session string) (delivered, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := slices.IndexFunc(d.state.Sessions, func(e delivered) bool { return e.Session == session })
	if i < 0 {
		return delivered{}, false
	}
	return d.state.Sessions[i], true
}

// known records the session of thread root in channel, durably, if it is
// not yet recorded.
func (d *delivery) known(channel, root string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if slices.ContainsFunc(d.state.Sessions, func(e delivered) bool { return e.Root == root }) {
		return nil
	}
	d.state.Sessions = append(d.state.Sessions, delivered{Session: SessionPrefix + root, Channel: channel, Root: root})
	if n := len(d.state.Sessions); n > maxDelivered {
		d.state.Sessions = slices.Delete(d.state.Sessions, 0, n-maxDelivered)
	}
	return d.write()
}

// mark records that session's outcomes up to turn are posted, durably.
func (d *delivery) mark(session string, turn int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := slices.IndexFunc(d.state.Sessions, func(e delivered) bool { return e.Session == session })
	if i < 0 || d.state.Sessions[i].Turn >= turn {
		return nil
	}
	d.state.Sessions[i].Turn = turn
	return d.write()
}

// write saves the state. Caller holds d.mu.
func (d *delivery) write() error {
	b, err := strict.Marshal(d.state)
	if err != nil {
		return fmt.Errorf("write deliveries: %v", err)
	}
	if err := writeAtomic(d.path, b); err != nil {
		return fmt.Errorf("write deliveries: %v", err)
	}
	return nil
}
