package stack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// TestStackMemoryTiering is the built-in tiering job on the real
// binaries: a conversation adds two identity entries and recalls one;
// at the job's time a session of its own on the background slot is
// shown each entry with its recall count, its consolidate (keep the
// used entry, move the other) goes through brokerd to memoryd, which
// journals it under the run's session, and bxctl memory undo takes it
// back.
func TestStackMemoryTiering(t *testing.T) {
	t.Parallel()
	js := newJobStack(t, 0, "tiering = \"0 * * * *\"\n")
	js.at("2026-12-01T09:30:00Z")
	js.up()
	js.srv.Script(
		fake.Reply{Reasoning: "Remember.", ToolCalls: []fake.ToolCall{{Name: "memory", Arguments: `{"action":"add","file":"memory","text":"The owner deploys with nixos-rebuild on straylight."}`}}},
		fake.Reply{Reasoning: "Remember.", ToolCalls: []fake.ToolCall{{Name: "memory", Arguments: `{"action":"add","file":"memory","text":"The 2019 project used Ansible."}`}}},
		fake.Reply{Reasoning: "Look it up.", ToolCalls: []fake.ToolCall{{Name: "recall", Arguments: `{"query":"deploys nixos-rebuild"}`}}},
		fake.Reply{Reasoning: "Done.", Content: "Noted."},
	)
	chat(t, js.bin, js.state, "s1", "remember how I deploy")
	mem := filepath.Join(layout.Memory.In(js.state), "memory.md")
	b, _ := os.ReadFile(mem)
	require.Equal(t, 2, strings.Count(string(b), "\n§\n")+1, "memory.md after the conversation:\n%s", b)

	js.until("job memory-tiering: cron 0 * * * *, deliver log, next 2026-12-01T10:00:00Z")
	js.srv.Script(
		fake.Reply{Reasoning: "Tier.", ToolCalls: []fake.ToolCall{{Name: "memory", Arguments: `{"action":"consolidate","file":"memory","plan":[{"op":"keep"},{"op":"move"}]}`}}},
		fake.Reply{Reasoning: "Done.", Content: "memory: kept 1, moved 1."},
	)
	js.at("2026-12-01T10:00:00Z")
	out := js.until("last: run 1 (session job-memory-tiering-1)", "answer: memory: kept 1, moved 1.")
	require.NotContains(t, out, "refused:", "the consolidate was refused")
	var prompt string
	for _, r := range js.srv.Requests(1) {
		if strings.Contains(string(r), "Memory tiering.") {
			prompt = string(r)
		}
	}
	require.Contains(t, prompt, "1. [found 1 times, last 20", "the used entry's count is not in the run's prompt")
	require.Contains(t, prompt, "2. [found 0 times, last never] The 2019 project used Ansible.")
	require.NotContains(t, prompt, "remember how I deploy", "the run carried the conversation's messages")

	b, _ = os.ReadFile(mem)
	require.Equal(t, "The owner deploys with nixos-rebuild on straylight.\n", string(b))
	notes, _ := os.ReadFile(filepath.Join(layout.Memory.In(js.state), "notes.md"))
	require.Contains(t, string(notes), "The 2019 project used Ansible.", "the moved entry is not in notes.md")
	log, err := bxctl(t, js.bin, "memory", "log", "--state", js.state)
	require.NoError(t, err, log)
	require.Regexp(t, `consolidate.*job-memory-tiering-1|job-memory-tiering-1.*consolidate`, log)
	undo, err := bxctl(t, js.bin, "memory", "undo", "--state", js.state, "memory.md")
	require.NoError(t, err, undo)
	b, _ = os.ReadFile(mem)
	require.Contains(t, string(b), "The 2019 project used Ansible.", "undo did not bring the moved entry back")
}
