package memd

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/cmd/memoryd/internal/recall"
	"wntrmute.dev/boxmaker/cmd/memoryd/internal/store"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// newMemd is a memoryd without sockets.
func newMemd(t *testing.T) *Memd {
	t.Helper()
	root := t.TempDir()
	m, err := New(slog.New(slog.DiscardHandler), Config{Config: memoryd.Config{StateDir: root}, maxClass: dataclass.Private})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func note(t *testing.T, m *Memd, session, text string) *wire.ToolResult {
	t.Helper()
	args, _ := json.Marshal(map[string]string{"action": "note", "text": text})
	return m.call(context.Background(), &wire.MemtoolCall{Session: session, Tool: "memory", Arguments: args, Taint: dataclass.Private})
}

// Each write indexes only the notes it added: the index is sent each note
// once (review: indexNotes sent every note again on each write), and
// recall still finds every note, old and new; a reindex sends them all.
func TestNotesIndexedIncrementally(t *testing.T) {
	m := newMemd(t)
	for i := range 5 {
		if r := note(t, m, "s1", fmt.Sprintf("kettle%d", i)); r.Status != wire.StatusRan {
			t.Fatalf("note %d: %+v", i, r)
		}
		if m.notesIndexed != i+1 {
			t.Fatalf("after note %d, %d notes indexed", i+1, m.notesIndexed)
		}
		if left, _ := m.store.NotesFrom(m.notesIndexed); len(left) != 0 {
			t.Fatalf("notes not indexed: %+v", left)
		}
	}
	// The cursor is what keeps the cost per write constant: notes the
	// index has are not sent again, so one the index lost is not
	// restored by a later write, only by a reindex.
	if err := m.index.Clear(); err != nil {
		t.Fatal(err)
	}
	note(t, m, "s1", "kettle5")
	hits, err := m.index.Recall(context.Background(), "kettle0 kettle5", 10, "")
	if err != nil || len(hits) != 1 || hits[0].Note != "n6" {
		t.Fatalf("after clearing the index and one write, recall = %+v, %v; want only n6 sent", hits, err)
	}
	m.adminMu.Lock()
	n, err := m.Rebuild()
	m.adminMu.Unlock()
	if err != nil || n != 6 || m.notesIndexed != 6 {
		t.Fatalf("Rebuild = %d, %v; %d notes indexed", n, err, m.notesIndexed)
	}
	for i := range 6 {
		hits, _ := m.index.Recall(context.Background(), fmt.Sprintf("kettle%d", i), 1, "")
		if len(hits) != 1 || hits[0].Source != recall.SourceMemory {
			t.Errorf("recall kettle%d = %+v", i, hits)
		}
	}
}

// memory.sock's identity request starts the session's epoch, which resets
// its note count; a request with a bad epoch is refused.
func TestIdentityRequestStartsNoteEpoch(t *testing.T) {
	h := start(t)
	call := func(text string) *wire.ToolResult {
		args, _ := json.Marshal(map[string]string{"action": "note", "text": text})
		r, ok := h.ask(t, h.cfg.MemtoolSocketDir, &wire.Memtool, &wire.MemtoolCall{Session: "s1", Tool: "memory", Arguments: args, Taint: dataclass.Private, Untrusted: true}).(*wire.ToolResult)
		if !ok {
			t.Fatalf("memory call: not a tool result")
		}
		return r
	}
	h.ask(t, h.cfg.MemorySocketDir, &wire.Memory, &wire.IdentityRequest{Session: "s1", Epoch: 0})
	for i := range store.MaxNotesPerEpoch {
		if r := call(fmt.Sprintf("note %d", i)); r.Status != wire.StatusRan {
			t.Fatalf("note %d: %+v", i, r)
		}
	}
	if r := call("one too many"); r.Status != wire.StatusDenied || !strings.Contains(r.Output, "see docs/runbook.md#memory-note-limit") {
		t.Fatalf("note past the cap: %+v", r)
	}
	if e, ok := h.ask(t, h.cfg.MemorySocketDir, &wire.Memory, &wire.IdentityRequest{Session: "s1", Epoch: -1}).(*wire.Error); !ok || e.Kind != wire.Invalid {
		t.Errorf("identity request with epoch -1 = %+v", e)
	}
	if _, ok := h.ask(t, h.cfg.MemorySocketDir, &wire.Memory, &wire.IdentityRequest{Session: "s1", Epoch: 1}).(*wire.IdentityBlock); !ok {
		t.Fatal("identity request for epoch 1 failed")
	}
	if r := call("next epoch"); r.Status != wire.StatusRan {
		t.Errorf("note in the next epoch: %+v", r)
	}
	notes, _ := os.ReadFile(filepath.Join(h.cfg.StateDir, "memory", "notes.md"))
	if strings.Contains(string(notes), "one too many") {
		t.Errorf("a refused note reached notes.md")
	}
}
