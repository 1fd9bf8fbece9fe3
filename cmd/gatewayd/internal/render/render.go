// Package render turns text Boxmaker did not write (the model's answers,
// a tool call's arguments) into Mattermost posts that show it and do
// nothing else.
//
// Invariants, for every output of [Answer] and [Approval]:
//   - no ASCII '@' survives, so no post can mention a user, @channel,
//     @here or @all (an answer's '@' becomes U+FF20 FULLWIDTH COMMERCIAL
//     AT; an argument's becomes the JSON escape \u0040, the same value);
//   - no image is embedded and no link is made: "![" is written "!\[",
//     "](" is written "]\(", "]:" is written "]\:" (so no inline image,
//     inline link or link reference definition survives), "://" is
//     written "[:]//" and "www." "www[.]" (so nothing is autolinked).
//     The inserted backslash always follows '!' or ']', never another
//     backslash, so no backslash the model wrote can cancel it, and the
//     escaping is applied to each post after the split, so no cut can
//     separate an escape from what it escapes. Together with the post
//     prop unsafe_links (see package mattermost) no URL the model chose
//     is fetched by the server for a preview;
//   - invisible and control runes are shown as escapes (package escape),
//     so nothing is hidden;
//   - arguments sit in a code fence longer than any run of backticks in
//     them, so they cannot close it and become markdown;
//   - each post is at most [mattermost.MaxRunes] runes and nothing is
//     dropped: long text becomes several posts.
package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/mattermost"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/escape"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// Answer renders a model answer as one or more posts.
func Answer(text string) []string {
	t := escape.Text(text)
	t = strings.ReplaceAll(t, "@", "\uff20")
	if strings.TrimSpace(t) == "" {
		t = "(the answer was empty)"
	}
	// Split first, then escape each post: an escape inserted before the
	// split could be cut from what it escapes. Escaping adds runes, so a
	// post that outgrows the limit is cut shorter and escaped again.
	var out []string
	for t != "" {
		limit := mattermost.MaxRunes
		for {
			cut := mattermost.Cut(t, limit)
			part := defang(t[:cut])
			if n := utf8.RuneCountInString(part); n > mattermost.MaxRunes {
				limit -= n - mattermost.MaxRunes
				continue
			}
			out = append(out, part)
			t = t[cut:]
			break
		}
	}
	return out
}

// defang writes the markdown that would embed an image, make a link or
// let the server autolink a URL so that it shows as text (see the
// package comment). Each inserted backslash follows '!' or ']', so no
// backslash in s can escape it.
func defang(s string) string {
	return linkSyntax.Replace(unlink(s))
}

// unlink defangs what an autolinker reads as a URL: any scheme's "://"
// and a "www." (case-insensitive), as "[:]//" and "www[.]". It runs
// before linkSyntax, which then escapes a "](" or "]:" it formed.
func unlink(s string) string {
	s = strings.ReplaceAll(s, "://", "[:]//")
	return www.ReplaceAllString(s, "${1}[.]")
}

var www = regexp.MustCompile(`(?i)(www)\.`)

var linkSyntax = strings.NewReplacer(
	"![", `!\[`,
	"](", `]\(`,
	"]:", `]\:`,
)

// Plain renders text of Boxmaker's own that quotes untrusted words (a
// stop reason, an error from loopd) as one line.
func Plain(text string) string {
	t := escape.Line(text)
	t = strings.ReplaceAll(t, "@", "\uff20")
	t = unlink(t)
	for _, c := range "*_`[]<>#~|" {
		t = strings.ReplaceAll(t, string(c), `\`+string(c))
	}
	return t
}

// Code renders untrusted text of one line as an inline code span, whose
// backtick fence is longer than any run inside it.
func Code(text string) string {
	t := strings.ReplaceAll(escape.Line(text), "@", "\uff20")
	f := fenceFor(t)[:max(1, longestRun(t)+1)]
	return f + " " + t + " " + f
}

// ApprovalPosts is an approval as posts.
type ApprovalPosts struct {
	Parts      []string
	Answerable bool   // false: too long for the chat; the post points to bxctl
	SHA256     string // hex SHA-256 of the arguments as brokerd holds them
}

// chunk is the budget of argument text per post, leaving room for the
// header, the fence and the last part's footer.
const chunk = mattermost.MaxRunes - 2000

// Approval renders pending call c in at most maxParts posts, the last
// one answerable; it repeats the id, the part count and the SHA-256 of
// the whole arguments. More than maxParts: one post pointing to bxctl.
func Approval(c wire.PendingCall, maxParts int) ApprovalPosts {
	sum := sha256.Sum256(c.Arguments)
	hash := hex.EncodeToString(sum[:])
	args := strings.ReplaceAll(escape.JSON(string(c.Arguments)), "@", `\u0040`)
	pieces := splitRunes(args, chunk)
	out := ApprovalPosts{SHA256: hash}
	tool := Code(c.Tool)
	if len(pieces) > maxParts {
		out.Parts = []string{fmt.Sprintf("**Approval %d**: a call to %s waits for you, but its arguments (%d bytes, SHA-256 %s) need %d posts, over this chat's limit of %d. Review and answer it on the host: `bxctl approvals %d`, then `bxctl approve %d CODE` or `bxctl refuse %d CODE`, with the code bxctl shows.",
			c.ID, tool, len(c.Arguments), hash, len(pieces), maxParts, c.ID, c.ID, c.ID)}
		return out
	}
	n := len(pieces)
	for i, p := range pieces {
		fence := fenceFor(p)
		var b strings.Builder
		fmt.Fprintf(&b, "**Approval %d**, part %d of %d: a call to %s, expires %s. Arguments:\n%sjson\n%s\n%s\n", c.ID, i+1, n, tool, Plain(c.Expires), fence, p, fence)
		if i < n-1 {
			fmt.Fprintf(&b, "Continued in part %d. Not answerable here: answer on part %d of %d.", i+2, n, n)
		} else {
			fmt.Fprintf(&b, "Approval %d: %d part(s); the arguments are %d bytes with SHA-256 `%s`.\nAnswer in this thread: `!approve %d %s` or `!deny %d %s [reason]`.", c.ID, n, len(c.Arguments), hash, c.ID, Plain(c.Code), c.ID, Plain(c.Code))
			b.WriteString(answers(c))
		}
		out.Parts = append(out.Parts, b.String())
	}
	out.Answerable = true
	return out
}

// answers says what each answer does, so that no answer reaches further
// than the owner read.
func answers(c wire.PendingCall) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n- `!approve %d %s`: runs this call only.", c.ID, Plain(c.Code))
	if c.SessionScope == "" {
		b.WriteString("\n- No `session` answer: every such call is shown to you.")
	} else {
		fmt.Fprintf(&b, "\n- `!approve %d %s session`: runs it, and from now on runs without asking %s, in this thread until its context is compacted (a new epoch), for at most 12 hours, while the grant is unchanged and the thread no more tainted; `!revoke %d` ends it.",
			c.ID, Plain(c.Code), Plain(c.SessionScope), c.ID)
		if c.Tool == toolset.ReadFile || c.Tool == toolset.WriteFile {
			fmt.Fprintf(&b, " `!approve %d %s session dir`: the same for every file directly in that file's directory.", c.ID, Plain(c.Code))
		}
		if c.Tool == toolset.ReadFile || c.Tool == toolset.HTTPFetch {
			fmt.Fprintf(&b, "\n- `!approve %d %s always`: runs it, and writes a grant proposal for the same, for good; nothing changes until you apply it on the host (`bxctl grants apply %d`).", c.ID, Plain(c.Code), c.ID)
		}
	}
	fmt.Fprintf(&b, "\n- `!deny %d %s [reason]`: refuses it.", c.ID, Plain(c.Code))
	return b.String()
}

// fenceFor is a backtick fence longer than any backtick run in s
// (CommonMark: a fence closes only with at least as many backticks).
func fenceFor(s string) string {
	return strings.Repeat("`", max(3, longestRun(s)+1))
}

func longestRun(s string) int {
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return longest
}

// splitRunes cuts s into pieces of at most n runes (no line preference:
// escaped JSON is one line).
func splitRunes(s string, n int) []string {
	var out []string
	for utf8.RuneCountInString(s) > n {
		i, k := 0, 0
		for i < len(s) && k < n {
			_, w := utf8.DecodeRuneInString(s[i:])
			i += w
			k++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return append(out, s)
}
