package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/mattermost"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// image is markdown that embeds an image: ![alt](url) or ![alt][ref]
// whose '!' is not escaped (preceded by an even number of backslashes,
// which escape each other).
var image = regexp.MustCompile(`(^|[^\\])(\\\\)*!\[`)

// link is markdown or an autolink that makes a link the server could
// preview: an inline link, a reference definition, a URL, a www. name.
var link = regexp.MustCompile(`(?i)\]\(|\]:|://|www\.`)

func TestAnswerHostile(t *testing.T) {
	for _, tt := range []struct {
		name, in, want string
	}{
		{"@channel", "Done. @channel look!", "Done. \uff20channel look!"},
		{"@here and @all", "@here @all", "\uff20here \uff20all"},
		{"user mention", "ask @owner", "ask \uff20owner"},
		{"image link", "see ![chart](https://evil.example/track.png?u=1)", `see !\[chart]\(https[:]//evil.example/track.png?u=1)`},
		{"reference image", "![x][1]\n\n[1]: https://evil.example/a.png", "!\\[x][1]\n\n[1]\\: https[:]//evil.example/a.png"},
		{"image at start of line", "a\n![x](y)", "a\n!\\[x]\\(y)"},
		{"escaped image stays escaped", `\![x](y)`, `\\!\[x]\(y)`},
		{"bare URL", "go to https://evil.example/p?q=1 now", "go to https[:]//evil.example/p?q=1 now"},
		{"other scheme", "ftp://evil.example", "ftp[:]//evil.example"},
		{"www name", "WwW.evil.example and www.x.y", "WwW[.]evil.example and www[.]x.y"},
		{"protocol-relative link", "[a](//evil.example/p)", `[a]\(//evil.example/p)`},
		{"www then paren", "www.(x)", `www[.]\(x)`},
		{"angle autolink", "<https://evil.example>", "<https[:]//evil.example>"},
		{"invisible runes shown", "ok\u202egnp.exe", `ok\u202egnp.exe`},
		{"escape sequence shown", "\x1b[31mred", `\u001b[31mred`},
		{"backslash kept visible", `\@channel`, `\\` + "\uff20channel"},
		{"empty", "", "(the answer was empty)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Answer(tt.in)
			if len(got) != 1 || got[0] != tt.want {
				t.Errorf("Answer(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestAnswerLong: a 20,000-rune answer becomes posts within the server's
// limit, split on rune boundaries, nothing lost.
func TestAnswerLong(t *testing.T) {
	in := strings.Repeat("é", 15000) + "\n" + strings.Repeat("日本語", 1000) + strings.Repeat("x", 1999)
	if n := utf8.RuneCountInString(in); n != 20000 {
		t.Fatalf("input has %d runes", n)
	}
	parts := Answer(in)
	if len(parts) != 2 {
		t.Fatalf("got %d parts, want 2", len(parts))
	}
	for i, p := range parts {
		if n := utf8.RuneCountInString(p); n > mattermost.MaxRunes || !utf8.ValidString(p) {
			t.Errorf("part %d: %d runes, valid %v", i, n, utf8.ValidString(p))
		}
	}
	if strings.Join(parts, "") != in {
		t.Error("the parts do not concatenate to the answer")
	}
	if !strings.HasSuffix(parts[0], "\n") {
		t.Error("the split did not prefer the line break")
	}
}

// TestAnswerEscapeAtCut: the split never separates an escape from what
// it escapes. An image (or an image after a backslash, which the escape
// doubles) placed exactly at the cut point stays inert in every part.
func TestAnswerEscapeAtCut(t *testing.T) {
	for _, tail := range []string{
		"![x](https://evil.example/p.png)",
		`\![x](https://evil.example/p.png)`,
		`\\![x](https://evil.example/p.png)`,
		"]: https://evil.example/p.png",
	} {
		for pad := mattermost.MaxRunes - 4; pad <= mattermost.MaxRunes+1; pad++ {
			parts := Answer(strings.Repeat("A", pad) + tail)
			for i, p := range parts {
				if image.MatchString(p) || link.MatchString(p) {
					t.Errorf("pad %d, tail %q: part %d embeds or links: %q", pad, tail, i+1, p[max(0, len(p)-40):])
				}
				if n := utf8.RuneCountInString(p); n > mattermost.MaxRunes {
					t.Errorf("pad %d: part %d has %d runes", pad, i+1, n)
				}
			}
		}
	}
}

// TestAnswerEscapesGrowPastLimit: escaping adds runes after the split;
// a post that outgrows the limit is cut shorter, nothing is lost.
func TestAnswerEscapesGrowPastLimit(t *testing.T) {
	in := strings.Repeat("![", 12000)
	parts := Answer(in)
	var all strings.Builder
	for i, p := range parts {
		if n := utf8.RuneCountInString(p); n > mattermost.MaxRunes {
			t.Errorf("part %d has %d runes", i+1, n)
		}
		if image.MatchString(p) {
			t.Errorf("part %d embeds", i+1)
		}
		all.WriteString(p)
	}
	if got := strings.ReplaceAll(all.String(), `\`, ""); got != in {
		t.Error("the parts lost text")
	}
}

func FuzzAnswer(f *testing.F) {
	for _, s := range []string{"@channel", "![a](b)", "x\u202e", strings.Repeat("ab ", 7000), "!![", "www.(a)", "]://", strings.Repeat("A", 16382) + `\![x](y)`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range Answer(s) {
			if strings.Contains(p, "@") {
				t.Fatalf("an @ survived: %q", p)
			}
			if image.MatchString(p) || strings.Contains(p, "![") {
				t.Fatalf("an image survived: %q", p)
			}
			if link.MatchString(p) {
				t.Fatalf("a link survived: %q", p)
			}
			if utf8.RuneCountInString(p) > mattermost.MaxRunes || !utf8.ValidString(p) {
				t.Fatalf("bad part")
			}
		}
	})
}

func call(args string) wire.PendingCall {
	return wire.PendingCall{ID: 42, Session: "mm-x", Tool: "http_fetch", Arguments: json.RawMessage(args), Expires: "2026-11-30T10:00:00Z"}
}

var hashLine = regexp.MustCompile("SHA-256 `([0-9a-f]{64})`")

// TestApprovalMultiPart: long arguments are never truncated; they span
// numbered parts, only the last is answerable, and it carries the id,
// the part count and the SHA-256 of the whole arguments.
func TestApprovalMultiPart(t *testing.T) {
	body := strings.Repeat("A", 40000)
	args := `{"url":"https://example.org/","body":"` + body + `"}`
	out := Approval(call(args), 4)
	if !out.Answerable || len(out.Parts) != 3 {
		t.Fatalf("got %d parts, answerable %v", len(out.Parts), out.Answerable)
	}
	var shown strings.Builder
	fence := regexp.MustCompile("(?s)```json\n(.*)\n```")
	for i, p := range out.Parts {
		if n := utf8.RuneCountInString(p); n > mattermost.MaxRunes {
			t.Errorf("part %d has %d runes", i+1, n)
		}
		if !strings.Contains(p, "**Approval 42**, part "+string(rune('1'+i))+" of 3") {
			t.Errorf("part %d is not numbered: %.80q", i+1, p)
		}
		answerable := strings.Contains(p, "!approve 42")
		if answerable != (i == 2) {
			t.Errorf("part %d answerable = %v", i+1, answerable)
		}
		m := fence.FindStringSubmatch(p)
		if m == nil {
			t.Fatalf("part %d has no fenced arguments", i+1)
		}
		shown.WriteString(m[1])
	}
	if shown.String() != args {
		t.Error("the parts do not show the whole arguments")
	}
	m := hashLine.FindStringSubmatch(out.Parts[2])
	sum := sha256.Sum256([]byte(args))
	if m == nil || m[1] != hex.EncodeToString(sum[:]) || out.SHA256 != m[1] {
		t.Errorf("last part's hash %v, want %x", m, sum)
	}
	if !strings.Contains(out.Parts[2], "3 part(s)") {
		t.Error("the last part does not repeat the part count")
	}
}

func TestApprovalTooLong(t *testing.T) {
	args := `{"body":"` + strings.Repeat("A", 80000) + `"}`
	out := Approval(call(args), 4)
	if out.Answerable || len(out.Parts) != 1 || !strings.Contains(out.Parts[0], "bxctl approvals 42") || strings.Contains(out.Parts[0], "!approve") {
		t.Errorf("too-long approval = %v %q", out.Answerable, out.Parts)
	}
}

func TestApprovalHostileArguments(t *testing.T) {
	args := `{"cmd":"` + "``````\\n@channel ![x](https://evil.example/i.png)\\u202e" + `"}`
	out := Approval(call(args), 4)
	p := out.Parts[0]
	if strings.Contains(p, "@channel") || strings.Contains(p, "\u202e") {
		t.Errorf("approval post leaks: %q", p)
	}
	if !strings.Contains(p, "```````json\n") {
		t.Errorf("the fence is not longer than the arguments' backticks: %q", p)
	}
	var back any
	m := regexp.MustCompile("(?s)```````json\n(.*)\n```````").FindStringSubmatch(p)
	if m == nil || json.Unmarshal([]byte(m[1]), &back) != nil {
		t.Fatalf("shown arguments are not JSON: %q", p)
	}
	var orig any
	json.Unmarshal([]byte(args), &orig)
	if b1, _ := json.Marshal(back); string(b1) != func() string { b, _ := json.Marshal(orig); return string(b) }() {
		t.Error("shown arguments are not the same value")
	}
}

func FuzzApproval(f *testing.F) {
	f.Add(`{"a":"@channel"}`, "tool`x", 4)
	f.Add(`{"a":"`+strings.Repeat("`", 30)+`"}`, "t", 1)
	f.Fuzz(func(t *testing.T, args, tool string, max int) {
		if !json.Valid([]byte(args)) || max < 1 || max > 8 {
			return
		}
		c := call(args)
		c.Tool = tool
		out := Approval(c, max)
		answerable := 0
		for i, p := range out.Parts {
			if strings.Contains(p, "@") {
				t.Fatalf("an @ survived: %q", p)
			}
			if strings.Contains(p, "!approve") {
				answerable++
				if i != len(out.Parts)-1 {
					t.Fatal("a part before the last is answerable")
				}
			}
		}
		if answerable > 1 || (answerable == 1) != out.Answerable {
			t.Fatalf("answerable parts %d, Answerable %v", answerable, out.Answerable)
		}
	})
}
