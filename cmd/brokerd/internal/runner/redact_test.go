package runner

import (
	"context"
	"errors"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/secret"
	"wntrmute.dev/boxmaker/pkg/toolinput"
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

// TestInvalidUTF8SecretRefused: a stored secret that is not valid UTF-8
// fails the call before any container exists, instead of reaching the
// tool changed by JSON (review 15).
func TestInvalidUTF8SecretRefused(t *testing.T) {
	dir := t.TempDir()
	p, err := New(Config{PodmanSocket: "/nonexistent/p.sock", ToolImage: testImage}, "i", t.TempDir(), nil,
		secrets(map[string]string{"BIN": "ok\xff"}), quiet)
	if err != nil {
		t.Fatal(err)
	}
	d := decide(t, autoGrant("s", "shell", []string{dir}, `secret = "BIN"`), "shell", map[string]string{"command": "true", "workdir": dir})
	if _, err := p.Run(context.Background(), d); !errors.Is(err, ErrSecretInvalid) || !strings.HasSuffix(err.Error(), "see docs/runbook.md#tool-secret-invalid") {
		t.Errorf("Run with a non-UTF-8 secret = %v", err)
	}
}
