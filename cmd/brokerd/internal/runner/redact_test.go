package runner

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/host/secret"
	"wntrmute.dev/boxmaker/pkg/tool/toolinput"
)

// TestRedactReplacesTheSecret: the exact secret value never leaves the
// runner in a tool's output (review 14).
func TestRedactReplacesTheSecret(t *testing.T) {
	sec := &toolinput.Secret{Name: "API_TOKEN", Value: secret.New([]byte("tok-123"))}
	out := redact(Output{Stdout: "a tok-123 b tok-123", Stderr: "tok-123\n", Exit: 1}, sec)
	if out.Stdout != "a [secret API_TOKEN] b [secret API_TOKEN]" || out.Stderr != "[secret API_TOKEN]\n" || out.Exit != 1 {
		t.Errorf("redact = %+v", out)
	}
	if out := redact(Output{Stdout: "tok-123"}, nil); out.Stdout != "tok-123" {
		t.Errorf("redact without a secret = %+v", out)
	}
}

// TestRedactEncodings: the secret's base64 (both alphabets, padded or
// not, and inside a longer base64 stream at each of the three byte
// alignments), hex (both cases), URL-escaped (query and path, both cases
// of escape) and JSON-escaped copies come back as [secret NAME] too
// (issue 13 item 5).
func TestRedactEncodings(t *testing.T) {
	const v = `tok-3f9a/Z+q?&= "x"<y>`
	sec := &toolinput.Secret{Name: "API_TOKEN", Value: secret.New([]byte(v))}
	const mark = "[secret API_TOKEN]"
	jsonBody := func(html bool) string {
		var b strings.Builder
		e := json.NewEncoder(&b)
		e.SetEscapeHTML(html)
		e.Encode(v)
		return strings.TrimSuffix(b.String(), "\n")[1 : b.Len()-2]
	}
	forms := map[string]string{
		"base64 std":      base64.StdEncoding.EncodeToString([]byte(v)),
		"base64 url":      base64.URLEncoding.EncodeToString([]byte(v)),
		"base64 raw std":  base64.RawStdEncoding.EncodeToString([]byte(v)),
		"base64 raw url":  base64.RawURLEncoding.EncodeToString([]byte(v)),
		"hex lower":       hex.EncodeToString([]byte(v)),
		"hex upper":       strings.ToUpper(hex.EncodeToString([]byte(v))),
		"query escape":    url.QueryEscape(v),
		"path escape":     url.PathEscape(v),
		"lower escapes":   lowerEscapes(url.QueryEscape(v)),
		"json":            jsonBody(true),
		"json, no html":   jsonBody(false),
		"json, upper \\u": strings.NewReplacer(`\u003c`, `\u003C`, `\u003e`, `\u003E`).Replace(jsonBody(true)),
	}
	for name, f := range forms {
		if f == v || len(f) < len(v) {
			t.Fatalf("%s: %q is not an encoding that differs from the value", name, f)
		}
		for _, text := range []string{f, "before " + f + " after", "a=" + f + "&b=" + f} {
			out := redact(Output{Stdout: text, Stderr: text}, sec)
			if strings.Contains(out.Stdout, f) || strings.Contains(out.Stderr, f) || !strings.Contains(out.Stdout, mark) {
				t.Errorf("%s: redact(%q) = %q", name, text, out.Stdout)
			}
		}
	}
	// The secret inside a longer document that is then base64-encoded:
	// at each byte offset mod 3 the characters that hold only the
	// secret's bits are replaced, and the document's other bytes stay
	// readable.
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding} {
		for _, prefix := range []string{"", "a", "ab", "abc", "{\"token\": \"", "0123456789"} {
			doc := prefix + v + "\" and some more text"
			stream := enc.EncodeToString([]byte(doc))
			out := redact(Output{Stdout: "data: " + stream + "\n"}, sec).Stdout
			// Characters [first, last) of the stream hold only the
			// secret's bits (each character holds 6 bits, the secret
			// bits 8·len(prefix) to 8·(len(prefix)+len(v))).
			first, last := (8*len(prefix)+5)/6, 8*(len(prefix)+len(v))/6
			if strings.Contains(out, stream[first:last]) || !strings.Contains(out, mark) {
				t.Errorf("offset %d in a base64 stream: %q", len(prefix), out)
			}
			// Whatever was left around the mark decodes to no copy.
			for _, part := range strings.Split(strings.TrimPrefix(strings.TrimSpace(out), "data: "), mark) {
				for cut := range 4 {
					if len(part) <= cut {
						continue
					}
					b, _ := base64.RawStdEncoding.DecodeString(strings.TrimRight(part[cut:len(part)-(len(part)-cut)%4], "="))
					if strings.Contains(string(b), "3f9a") {
						t.Errorf("offset %d: %q decodes to part of the secret", len(prefix), part)
					}
				}
			}
			if prefix == "0123456789" && !strings.HasPrefix(out, "data: "+stream[:12]) {
				t.Errorf("the stream's own bytes before the secret were changed: %q", out)
			}
		}
	}
	// Output holding none of them is unchanged, and a short secret's
	// encodings (which would match by chance) are left alone.
	clean := "aGVsbG8gd29ybGQ= 68656c6c6f hello%20world"
	if out := redact(Output{Stdout: clean}, sec); out.Stdout != clean {
		t.Errorf("clean output changed: %q", out.Stdout)
	}
	short := &toolinput.Secret{Name: "PIN", Value: secret.New([]byte("123"))}
	if out := redact(Output{Stdout: "123 MTIz 313233"}, short); out.Stdout != "[secret PIN] MTIz 313233" {
		t.Errorf("short secret: %q", out.Stdout)
	}
}

// TestSecretFormsOrder: the longest forms come first, so a whole copy
// is replaced rather than a shorter form inside it, and none repeats.
func TestSecretFormsOrder(t *testing.T) {
	forms := secretForms("value-a-7f3e-long-enough")
	seen := map[string]bool{}
	for i, f := range forms {
		if seen[f] || i > 0 && len(f) > len(forms[i-1]) {
			t.Fatalf("secretForms = %q", forms)
		}
		seen[f] = true
	}
	if secretForms("") != nil {
		t.Error("an empty secret has forms")
	}
}

// TestInvalidUTF8SecretRefused: a stored secret that is not valid UTF-8
// fails the call before any container exists, instead of reaching the
// tool changed by JSON (review 15).
func TestInvalidUTF8SecretRefused(t *testing.T) {
	dir := t.TempDir()
	p, err := New(Config{Runner: brokerd.Runner{PodmanSocket: "/nonexistent/p.sock", ToolImage: testImage}}, "i", t.TempDir(), nil,
		secrets(map[string]string{"BIN": "ok\xff"}), quiet)
	if err != nil {
		t.Fatal(err)
	}
	d := decide(t, autoGrant("s", "shell", []string{dir}, `secret = "BIN"`), "shell", map[string]string{"command": "true", "workdir": dir})
	if _, err := p.Run(context.Background(), d); !errors.Is(err, ErrSecretInvalid) || !strings.HasSuffix(err.Error(), "see docs/runbook.md#tool-secret-invalid") {
		t.Errorf("Run with a non-UTF-8 secret = %v", err)
	}
}

// TestEncodedSecretRedactedInACall: in a real shell call, the secret
// printed through busybox's base64 and xxd, alone and inside a longer
// stream at each alignment, comes back only as [secret TOKEN_A].
func TestEncodedSecretRedactedInACall(t *testing.T) {
	_, p := toolRunner(t, nil)
	const v = "value-a-7f3e" // TOKEN_A in newRunner's table
	out := shellIn(t, p, t.TempDir(), false, `f=$BOXMAKER_SECRET_FILE
base64 <"$f"; base64 <"$f" | tr -d =; base64 <"$f" | tr +/ -_
xxd -p "$f"; xxd -p "$f" | tr a-f A-F
for pre in '' a ab; do printf '%s%s and more' "$pre" "$(cat "$f")" | base64; done`, `secret = "TOKEN_A"`)
	if out.Exit != 0 {
		t.Fatalf("shell = %+v", out)
	}
	lines := strings.Split(strings.TrimSpace(out.Stdout), "\n")
	if len(lines) != 8 {
		t.Fatalf("want 8 lines: %q", out.Stdout)
	}
	for i, l := range lines {
		if !strings.Contains(l, "[secret TOKEN_A]") {
			t.Errorf("line %d %q: no mark", i, l)
		}
	}
	for _, f := range []string{base64.StdEncoding.EncodeToString([]byte(v)), hex.EncodeToString([]byte(v)), strings.ToUpper(hex.EncodeToString([]byte(v))),
		base64.RawStdEncoding.EncodeToString([]byte(v))[1:14]} {
		if strings.Contains(out.Stdout, f) {
			t.Errorf("output holds %q: %q", f, out.Stdout)
		}
	}
}
