package runner

import (
	"cmp"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"wntrmute.dev/boxmaker/pkg/tool/toolinput"
)

// redact replaces every occurrence of the call's secret value in the
// tool's stdout and stderr, and of its common encodings, with
// "[secret NAME]", so a command that prints its token, or its token
// encoded, does not hand it to the model, the session log and the audit
// record (review 14, issue 13 item 5). The encodings are those of
// secretForms. It runs on the captured output as a whole, so a copy is
// caught wherever the attach stream's frames split it; it cannot catch a
// copy cut off by the output cap, one encrypted, compressed or encoded
// some other way (base32, a reversed string): the grant's secret is still
// exposed to whatever the tool runs.
func redact(out Output, sec *toolinput.Secret) Output {
	if sec == nil {
		return out
	}
	forms := secretForms(sec.Value.Reveal())
	if len(forms) == 0 {
		return out
	}
	mark := "[secret " + sec.Name + "]"
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, mark)
	}
	// At each position the Replacer tries the forms in argument order;
	// secretForms puts the longest first, so a whole copy wins over a
	// shorter form inside it.
	r := strings.NewReplacer(pairs...)
	out.Stdout = r.Replace(out.Stdout)
	out.Stderr = r.Replace(out.Stderr)
	return out
}

// minEncoded is the shortest encoded form redacted. A shorter one (a
// secret of a few bytes) would match ordinary output by chance and
// corrupt it; the value itself is redacted at any length.
const minEncoded = 8

// secretForms is the value and each of its common encodings, longest
// first, without repeats:
//   - base64, standard and URL alphabets, padded and unpadded;
//   - the part of each alphabet's base64 that depends on the value alone
//     when it sits at byte offset 0, 1 or 2 (mod 3) inside a longer
//     encoded stream (a file or a JSON document holding the secret, then
//     base64-encoded): up to two characters at each end mix in the
//     neighbouring bytes and stay;
//   - hexadecimal, lower and upper case (any offset in a longer hex
//     stream matches it as it is);
//   - URL encoding: query escaping (space as +) and path escaping, with
//     the %XX escapes in upper or in lower case;
//   - the body of a JSON string holding it (quotes, backslashes and
//     control characters escaped, and <, > and & too or not, as Go's
//     encoder does either way; the \uXXXX escapes in lower or in upper
//     case).
func secretForms(v string) []string {
	if v == "" {
		return nil
	}
	forms := []string{v}
	add := func(f string) {
		if len(f) >= minEncoded {
			forms = append(forms, f)
		}
	}
	b := []byte(v)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		add(enc.EncodeToString(b))
	}
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for off := range 3 {
			add(alignedBase64(enc, b, off))
		}
	}
	h := hex.EncodeToString(b)
	add(h)
	add(strings.ToUpper(h))
	for _, e := range []string{url.QueryEscape(v), url.PathEscape(v)} {
		add(e)
		add(lowerEscapes(e))
	}
	for _, html := range []bool{true, false} {
		var j strings.Builder
		e := json.NewEncoder(&j)
		e.SetEscapeHTML(html)
		if e.Encode(v) == nil {
			body := strings.TrimSuffix(j.String(), "\n")
			body = body[1 : len(body)-1]
			add(body)
			add(unicodeEscape.ReplaceAllStringFunc(body, func(u string) string { return `\u` + strings.ToUpper(u[2:]) }))
		}
	}
	slices.SortFunc(forms, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) })
	return slices.Compact(forms)
}

// alignedBase64 is the run of characters of enc's encoding of b, placed
// off bytes into a longer stream, that depend on b's bytes alone: b's
// bits are [8·off, 8·(off+len)) of the stream, and character i holds bits
// [6i, 6i+6).
func alignedBase64(enc *base64.Encoding, b []byte, off int) string {
	stream := enc.EncodeToString(append(make([]byte, off), b...))
	first := (8*off + 5) / 6       // the first character wholly inside b
	last := 8 * (off + len(b)) / 6 // one past the last
	if last <= first || last > len(stream) {
		return ""
	}
	return stream[first:last]
}

var (
	percentEscape = regexp.MustCompile(`%[0-9A-F]{2}`)
	unicodeEscape = regexp.MustCompile(`\\u[0-9a-f]{4}`)
)

// lowerEscapes writes a URL's %XX escapes in lower case, as some encoders
// do.
func lowerEscapes(s string) string { return percentEscape.ReplaceAllStringFunc(s, strings.ToLower) }
