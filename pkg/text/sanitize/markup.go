package sanitize

import (
	"regexp"
	"strings"
)

// markup is the chat-template markup of the model families in use (Qwen
// and its ChatML, Llama, Gemma, Mistral), lower case, found in the markup
// form ([markupForm]: normalised, white space removed). Any "<|...|>"
// special token (ChatML, Llama 3 and 4, Phi, gpt-oss's harmony, and
// DeepSeek's full-width bars once normalised) is refused by [specialRE]
// as well.
var markup = []string{
	"<think>", "</think>", "<tool_call", "</tool_call", "<tool_response", "</tool_response",
	"<tools>", "</tools>", "<function=", "</function>", "<parameter=", "</parameter>",
	"<start_of_turn>", "<end_of_turn>", "[inst]", "[/inst]", "<<sys>>", "<</sys>>",
	"<s>", "</s>", "[tool_calls]", "[available_tools]", "[/available_tools]",
	"[tool_results]", "[/tool_results]", "[system_prompt]", "[/system_prompt]",
}

// specialRE matches a special token such as <|im_start|> or <|eot_id|>.
var specialRE = regexp.MustCompile(`<\|[^\n<>|]{0,40}\|>`)

// findMarkup reports the first chat-template markup in the markup form f.
func findMarkup(f form) (span, string, bool) {
	best, what := span{-1, -1}, ""
	if loc := specialRE.FindStringIndex(f.s); loc != nil {
		best, what = span{loc[0], loc[1]}, f.s[loc[0]:loc[1]]
	}
	for _, m := range markup {
		if i := strings.Index(f.s, m); i >= 0 && (best.start < 0 || i < best.start) {
			best, what = span{i, i + len(m)}, m
		}
	}
	return best, what, best.start >= 0
}

// identityNames are the identity block's own headings (memoryd writes
// "# Identity" and "## soul.md (N/M characters)" for each file), as the
// letters and digits of a heading's text: a heading that names one
// imitates the block's structure from inside a file.
var identityNames = []string{"soulmd", "memorymd", "usermd"}

// headingWords are headings refused when they are the whole heading.
var headingWords = []string{"identity", "soul", "memory", "user", "system", "systemprompt"}

// gaugeRE is the fill gauge of the identity block's headings.
var gaugeRE = regexp.MustCompile(`\d+ ?/ ?\d+ ?characters?`)

// findHeading reports the first line of the normalised text us that is a
// markdown heading (ATX "# ...", in a block quote or not, or setext:
// a line underlined with = or -) naming an identity file, being one of
// [headingWords], or carrying the block's fill gauge; or a line that
// starts with an identity file's name and carries the gauge. It returns
// the unit index of the line's start and the name found.
func findHeading(us []unit) (int, string, bool) {
	if hs := headings(us, true); len(hs) > 0 {
		return hs[0].line.start, hs[0].what, true
	}
	return 0, "", false
}

// headingHit is one line [findHeading] refuses: the line, the line that
// makes it a heading (a setext underline, else the line itself) and
// what it names.
type headingHit struct {
	line, mark span
	what       string
}

// headings lists the lines [findHeading] refuses, in order; with first
// set, only the first.
func headings(us []unit, first bool) []headingHit {
	var out []headingHit
	lines := splitLines(us)
	for n, l := range lines {
		line := us[l.start:l.end]
		mark := l
		text, heading := headingText(line)
		if !heading && n+1 < len(lines) && underline(us[lines[n+1].start:lines[n+1].end]) {
			text, heading, mark = runes(line), true, lines[n+1]
		}
		if !heading && !startsWithName(line) {
			continue
		}
		if what, ok := headingNames(text, heading, line); ok {
			out = append(out, headingHit{l, mark, what})
			if first {
				return out
			}
		}
	}
	return out
}

// headingNames judges one line: what it names if it is refused.
func headingNames(text string, heading bool, line []unit) (string, bool) {
	if !heading {
		text = runes(line)
	}
	sq := squashString(text)
	for _, name := range identityNames {
		if heading && strings.Contains(sq, name) || !heading && strings.HasPrefix(sq, name) && gaugeRE.MatchString(text) {
			return name[:len(name)-2] + ".md", true
		}
	}
	if !heading {
		return "", false
	}
	for _, w := range headingWords {
		if sq == w {
			return w, true
		}
	}
	if gaugeRE.MatchString(text) {
		return "the identity block's fill gauge", true
	}
	return "", false
}

// startsWithName reports a line whose first letter is that of an identity
// file's name (s, m or u), the only lines that can start with one.
func startsWithName(line []unit) bool {
	for _, u := range line {
		if alnum(u.r) {
			return u.r == 's' || u.r == 'm' || u.r == 'u'
		}
	}
	return false
}

func splitLines(us []unit) []span {
	var lines []span
	start := 0
	for i, u := range us {
		if u.r == '\n' {
			lines = append(lines, span{start, i})
			start = i + 1
		}
	}
	return append(lines, span{start, len(us)})
}

// headingText returns an ATX heading's text: after leading white space
// and block-quote marks, one or more #.
func headingText(line []unit) (string, bool) {
	i := 0
	for i < len(line) && (space(line[i].r) || line[i].r == '>') {
		i++
	}
	if i >= len(line) || line[i].r != '#' {
		return "", false
	}
	for i < len(line) && line[i].r == '#' {
		i++
	}
	return runes(line[i:]), true
}

// underline reports a setext heading's underline: only = or only -, with
// white space around.
func underline(line []unit) bool {
	var mark rune
	for _, u := range line {
		switch {
		case space(u.r):
		case (u.r == '=' || u.r == '-') && (mark == 0 || mark == u.r):
			mark = u.r
		default:
			return false
		}
	}
	return mark != 0
}

func runes(us []unit) string {
	var b strings.Builder
	for _, u := range us {
		b.WriteRune(u.r)
	}
	return b.String()
}

func squashString(s string) string {
	var b strings.Builder
	for _, r := range s {
		if alnum(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}
