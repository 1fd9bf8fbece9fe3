package memd

import (
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/cmd/memoryd/internal/store"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

func (h *harness) chat(t *testing.T, v strict.Variant) strict.Variant {
	t.Helper()
	return h.ask(t, h.cfg.ChatSocketDir, &wire.Memchat, v)
}

const (
	threadA = "tttttttttttttttttttttttttt"
	threadB = "uuuuuuuuuuuuuuuuuuuuuuuuuu"
	owner   = "oooooooooooooooooooooooooo"
)

// TestChatWhyAndForget: memchat.sock answers `!why` with the chain and
// `!forget` in two steps, the second only with the code memoryd made,
// from the same thread, once; another project's entry is refused in
// both; the tombstone says who asked, and where.
func TestChatWhyAndForget(t *testing.T) {
	h := twoProjects(t)
	h.epoch(t, "sa", chanA)
	h.tool(t, "sa", "memory", `{"action":"note","text":"The alpha boiler code is kestrel."}`, dataclass.Private, false)
	if c, ok := h.chat(t, &wire.ChatWhy{ID: "n1", Thread: threadA, Channel: chanA, User: owner}).(*wire.WhyChain); !ok || !strings.Contains(strings.Join(c.Steps, "\n"), "kestrel") {
		t.Fatalf("why n1 in alpha = %+v", c)
	}
	for _, v := range []strict.Variant{&wire.ChatWhy{ID: "n1", Thread: threadA, Channel: chanB, User: owner}, &wire.ChatWhy{ID: "n1", Thread: threadA, Channel: chanX, User: owner},
		&wire.ChatForget{ID: "n1", Thread: threadA, Channel: chanB, User: owner}} {
		if e, ok := h.chat(t, v).(*wire.Error); !ok || !strings.Contains(e.Msg, "not in this thread's memory") || !strings.Contains(e.Msg, "runbook.md#memory-chat-commands") {
			t.Errorf("%+v = %v, want not in this thread's memory", v, e)
		}
	}
	fc, ok := h.chat(t, &wire.ChatForget{ID: "n1", Thread: threadA, Channel: chanA, User: owner}).(*wire.ForgetCode)
	if !ok || !strings.Contains(fc.What, "kestrel") || len(fc.Code) != wire.ApprovalCodeLen || fc.Minutes != 10 {
		t.Fatalf("forget n1 = %+v", fc)
	}
	wrong := "000000"
	if fc.Code == wrong {
		wrong = "111111"
	}
	for _, tt := range []struct {
		v    *wire.ChatForget
		want string
	}{
		{&wire.ChatForget{ID: "n1", Thread: threadA, Channel: chanA, User: owner, Code: wrong}, "the code is wrong"},
		{&wire.ChatForget{ID: "n1", Thread: threadB, Channel: chanA, User: owner, Code: fc.Code}, "no forget of n1 is waiting in this thread"},
	} {
		if e, ok := h.chat(t, tt.v).(*wire.Error); !ok || !strings.Contains(e.Msg, tt.want) || !strings.Contains(e.Msg, "nothing was forgotten") {
			t.Errorf("%+v = %v, want %q", tt.v, e, tt.want)
		}
	}
	if found, _ := h.recalls(t, "sa", "kestrel", "from=note n1"); !found {
		t.Fatal("a refused forget forgot")
	}
	d, ok := h.chat(t, &wire.ChatForget{ID: "n1", Thread: threadA, Channel: chanA, User: owner, Code: strings.ToUpper(fc.Code)}).(*wire.MemoryDone)
	if !ok || !strings.Contains(d.Msg, "forgot n1") {
		t.Fatalf("forget with the code = %+v", d)
	}
	if found, r := h.recalls(t, "sa", "kestrel", "from=note n1"); found {
		t.Errorf("recall still finds n1:\n%s", r.Output)
	}
	if e, ok := h.chat(t, &wire.ChatForget{ID: "n1", Thread: threadA, Channel: chanA, User: owner, Code: fc.Code}).(*wire.Error); !ok || !strings.Contains(e.Msg, "no forget of n1 is waiting") {
		t.Errorf("a code used twice = %v", e)
	}
	n, ok := h.storeNote(t, "n2")
	if !ok || n.Kind != store.KindForget || n.Ref != "n1" || !strings.Contains(n.Text, "asked in the chat by Mattermost user "+owner+" in thread "+threadA) {
		t.Errorf("tombstone = %+v", n)
	}
	// A secret note never goes to the chat, neither its chain nor its
	// confirmation.
	if r := h.tool(t, "sa", "memory", `{"action":"note","text":"The vault PIN is 4471."}`, dataclass.Secret, false); !strings.Contains(r.Output, "noted as n3") {
		t.Fatalf("secret note = %q", r.Output)
	}
	for _, v := range []strict.Variant{&wire.ChatWhy{ID: "n3", Thread: threadA, Channel: chanA, User: owner}, &wire.ChatForget{ID: "n3", Thread: threadA, Channel: chanA, User: owner}} {
		if e, ok := h.chat(t, v).(*wire.Error); !ok || !strings.Contains(e.Msg, "class secret, which never goes to the chat") || strings.Contains(e.Msg, "4471") {
			t.Errorf("%s of a secret note = %v", v.Tag(), e)
		}
	}
	// Three wrong codes end the wait.
	h.tool(t, "sa", "memory", `{"action":"note","text":"The alpha gate word is plover."}`, dataclass.Private, false)
	fc, _ = h.chat(t, &wire.ChatForget{ID: "n4", Thread: threadA, Channel: chanA, User: owner}).(*wire.ForgetCode)
	for range 3 {
		h.chat(t, &wire.ChatForget{ID: "n4", Thread: threadA, Channel: chanA, User: owner, Code: wrong})
	}
	if e, ok := h.chat(t, &wire.ChatForget{ID: "n4", Thread: threadA, Channel: chanA, User: owner, Code: fc.Code}).(*wire.Error); !ok || !strings.Contains(e.Msg, "no forget of n4 is waiting") {
		t.Errorf("the right code after three wrong = %v", e)
	}
}

// TestChatSocketIsNarrow: memchat.sock takes nothing of memadmin.sock's
// (undo, reindex, review, forget without a code), and memadmin.sock and
// memtool.sock take nothing of memchat.sock's.
func TestChatSocketIsNarrow(t *testing.T) {
	h := start(t)
	for _, v := range []strict.Variant{&wire.MemoryUndo{File: "memory.md"}, &wire.Reindex{}, &wire.ReviewList{},
		&wire.ReviewDecide{ID: "n1", Action: "drop"}, &wire.MemoryForget{ID: "n1"}, &wire.MemoryWhy{ID: "n1"}, &wire.FleetResync{}} {
		if e, ok := h.chat(t, v).(*wire.Error); !ok || e.Kind != wire.Forbidden {
			t.Errorf("%s on memchat.sock = %v, want forbidden", v.Tag(), e)
		}
	}
	for _, tt := range []struct {
		dir string
		s   *wire.Socket
	}{{h.cfg.AdminSocketDir, &wire.Memadmin}, {h.cfg.MemtoolSocketDir, &wire.Memtool}, {h.cfg.MemorySocketDir, &wire.Memory}} {
		if e, ok := h.ask(t, tt.dir, tt.s, &wire.ChatForget{ID: "n1", Thread: threadA, Channel: chanA, Code: "000000"}).(*wire.Error); !ok || e.Kind != wire.Forbidden {
			t.Errorf("chat_forget on %s = %v, want forbidden", tt.s.Name, e)
		}
	}
}

func (h *harness) storeNote(t *testing.T, id string) (store.Note, bool) {
	t.Helper()
	st, err := store.Open(filepath.Join(h.cfg.StateDir, "memory"), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	return st.Note(id)
}
