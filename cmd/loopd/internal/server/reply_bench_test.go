package server

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/checks/sockettest"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/memory"
	"wntrmute.dev/boxmaker/cmd/loopd/internal/session"
	"wntrmute.dev/boxmaker/pkg/model/llama"
	"wntrmute.dev/boxmaker/pkg/socket/rpc"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// lastByte is the turn's model: the llama client, noting when each
// completion returned, which is when loopd has read the model's last
// byte ([DONE]).
type lastByte struct {
	*llama.Client
	mu sync.Mutex
	at time.Time
}

func (m *lastByte) Complete(ctx context.Context, req llama.Request, prev llama.SlotState) (*llama.Completion, error) {
	c, err := m.Client.Complete(ctx, req, prev)
	m.mu.Lock()
	m.at = time.Now()
	m.mu.Unlock()
	return c, err
}

func (m *lastByte) last() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.at
}

// gateHeld is how long the fake memoryd holds each turn_done: memoryd
// files a turn for fleet memory only once brokerd's gate has answered,
// and memory.sock waits up to 10 s for it. Longer than the whole
// benchmark, so every turn but the first finds memoryd still busy.
const gateHeld = 10 * time.Second

// BenchmarkReplyMemory measures the owner's wait that memory could add:
// the time from loopd's read of the model's last byte to the answer frame
// read on loop.sock by a client speaking gatewayd's protocol (gatewayd
// posts the answer as it reads it; that part is the same either way).
// Two loopds run side by side, each with its own fake llama-server,
// their turns alternating so that both see the same load: "off" has no
// memory.sock; "on" hands every ended turn to a memoryd that holds
// turn_done for gateHeld, as one waiting on a slow gate does. Session
// logs are on tmpfs where there is one, so that fsync noise, the same
// for both, does not hide the difference. The goal (issue 31 item 6): the
// p50s no more than 2 ms apart. Reported: each side's p50 and p95 and
// the p50s' difference, in ms.
func BenchmarkReplyMemory(b *testing.B) {
	off, on := replySide(b, false), replySide(b, true)
	b.ResetTimer()
	for range b.N {
		off.turn(b)
		on.turn(b)
	}
	b.StopTimer()
	p50off, p95off := off.quantiles()
	p50on, p95on := on.quantiles()
	b.ReportMetric(p50off, "off-p50-ms")
	b.ReportMetric(p95off, "off-p95-ms")
	b.ReportMetric(p50on, "on-p50-ms")
	b.ReportMetric(p95on, "on-p95-ms")
	b.ReportMetric(p50on-p50off, "diff-p50-ms")
	// The handover is asynchronous: give memoryd a moment to hear of the
	// first turn, or the run did not measure memory on.
	for deadline := time.Now().Add(5 * time.Second); on.heard() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("memoryd never heard of a turn: the benchmark did not measure memory on")
		}
	}
}

// side is one loopd of the benchmark and the waits it measured.
type side struct {
	model *lastByte
	conn  *sockettest.Conn
	waits []time.Duration

	mu   sync.Mutex
	held int // turn_done requests the fake memoryd received
}

func replySide(b *testing.B, withMemory bool) *side {
	srv := fake.New(b, fake.Options{})
	srv.Respond(func([]byte) (fake.Reply, bool) { return fake.Reply{Reasoning: "Greet.", Content: "Hello."}, true })
	c, err := llama.New(llama.Config{BaseURL: srv.URL(), Model: "fake-model", IDSlot: 0})
	if err != nil {
		b.Fatal(err)
	}
	sd := &side{model: &lastByte{Client: c}}
	opt := func(m *Manager) { m.Engine.Model = sd.model }
	if withMemory {
		log := slog.New(slog.DiscardHandler)
		path := sockettest.Serve(b, filepath.Join(b.TempDir(), "m"), &wire.Memory, rpc.NewServer(&wire.Memory, log,
			rpc.On(func(ctx context.Context, _ sockets.Peer, _ *wire.TurnDone) strict.Variant {
				sd.mu.Lock()
				sd.held++
				sd.mu.Unlock()
				select {
				case <-time.After(gateHeld):
				case <-ctx.Done():
				}
				return &wire.TurnIndexed{}
			})).Serve)
		ctx, cancel := context.WithCancel(context.Background())
		b.Cleanup(cancel)
		notify := memory.NewNotifier(ctx, &memory.Client{Path: path}, log)
		opt = func(m *Manager) {
			m.Engine.Model = sd.model
			m.Engine.Ended = func(s *session.Session, t int64) { notify.Ended(s.ID, s.Epoch, t) }
		}
	}
	h := start(b, srv, tmpfsDir(b), opt)
	sd.conn = sockettest.Dial(b, &wire.Loop, h.sock)
	return sd
}

// turn sends one message and notes the wait for its answer.
func (sd *side) turn(b *testing.B) {
	sd.conn.Send(&wire.Send{Session: "s1", Text: "hi"})
	for {
		v := sd.conn.Recv()
		if _, ok := v.(*wire.Answer); ok {
			sd.waits = append(sd.waits, time.Since(sd.model.last()))
			return
		}
		if wire.Loop.Final(v) {
			b.Fatalf("turn ended with %#v", v)
		}
	}
}

func (sd *side) heard() int {
	sd.mu.Lock()
	defer sd.mu.Unlock()
	return sd.held
}

func (sd *side) quantiles() (p50, p95 float64) {
	slices.Sort(sd.waits)
	return ms(sd.waits[len(sd.waits)/2]), ms(sd.waits[len(sd.waits)*95/100])
}

// tmpfsDir is a fresh directory, on /dev/shm when there is one.
func tmpfsDir(b *testing.B) string {
	if d, err := os.MkdirTemp("/dev/shm", "loopd-bench-"); err == nil {
		b.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	return b.TempDir()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
