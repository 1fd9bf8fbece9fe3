package stack

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	session "wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	chatmsg "wntrmute.dev/boxmaker/pkg/model/chat"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

// prose is ordinary English of the kind identity files hold, used to fill
// a file to its limit.
const prose = "The owner works on Boxmaker most mornings and prefers short, plain answers with the reasoning kept brief. " +
	"Reports go out on Fridays; drafts are reviewed before anything is sent. Ask before deleting or overwriting files. " +
	"Use metric units, 24-hour times and ISO dates, and name the source of every figure quoted. "

// fill returns entries of prose separated as memoryd separates them,
// exactly n characters long.
func fill(n int) string {
	var b strings.Builder
	for b.Len() < 2*n {
		b.WriteString(prose + "\n§\n")
	}
	r := []rune(b.String())[:n]
	r[n-1] = '.'
	return string(r)
}

// TestStackBaselineBudget is the loop issue's budget test with real files:
// soul.md, memory.md and user.md each filled to their limits, the identity
// block built by memoryd and snapshotted by loopd, and the whole baseline
// (system prompt, identity block, core tool schemas) measured with the
// fake's tokenizer. The device check repeats this with the server's.
func TestStackBaselineBudget(t *testing.T) {
	t.Parallel()
	bin, state, srv := stack(t, 65536)
	mem := filepath.Join(state, "memory")
	os.MkdirAll(mem, 0o700)
	for f, n := range map[string]int{"soul.md": 4000, "memory.md": 2200, "user.md": 1375} {
		require.NoError(t, os.WriteFile(filepath.Join(mem, f), []byte(fill(n)), 0o600))
	}
	up(t, bin, state, srv)
	srv.Script(fake.Reply{Reasoning: "Greet.", Content: "Hello."})
	chat(t, bin, state, "s1", "x")
	var base session.Baseline
	require.NoError(t, strict.Unmarshal([]byte(readFile(t, filepath.Join(state, "sessions", "s1", "0.baseline.json"))), &base))
	for _, want := range []string{"## soul.md (4000/4000 characters)", "## memory.md (2200/2200 characters)", "## user.md (1375/1375 characters)"} {
		if !strings.Contains(base.System, want) {
			t.Fatalf("baseline lacks %q", want)
		}
	}
	body, _ := json.Marshal(map[string]any{
		"model":    "fake-model",
		"messages": []chatmsg.Message{{Role: "system", Content: base.System}, {Role: "user", Content: "x"}},
		"tools":    base.Tools,
	})
	prompt, err := fake.RenderPrompt(body)
	require.NoError(t, err)
	n := pretokens(prompt)
	t.Logf("baseline with full identity files: %d pre-tokens (Qwen2 rule), %d pieces by the fake's byte-level tokenizer", n, len(fake.Tokenize(prompt)))
	if n > 3000 {
		t.Errorf("baseline is %d pre-tokens, over the budget of 3,000", n)
	}
}

// qwenPretok is Qwen2's pre-tokenizer rule (tokenizer.json, "Split"
// pattern) without its one look-ahead, which Go's regexp lacks (it only
// merges trailing spaces differently). Every pre-token is at least one
// BPE token, and a common English word with its leading space is exactly
// one, so for prose this is close to the real count; the fake's tokenizer,
// which makes every space and punctuation byte a piece, counts prose about
// twice over and cannot measure this budget. The real tokenizer's count
// is the device check's (make verify-device).
var qwenPretok = regexp.MustCompile(`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+`)

func pretokens(prompt string) int {
	n := 0
	for _, sp := range []string{"<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>"} {
		n += strings.Count(prompt, sp)
		prompt = strings.ReplaceAll(prompt, sp, " ")
	}
	return n + len(qwenPretok.FindAllString(prompt, -1))
}
