package clients

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TypeCheck is one answer to check: Value must be assignable to Type
// (a TypeScript type expression over the check's imports).
type TypeCheck struct {
	Label string
	Type  string
	Value json.RawMessage
}

// CheckTypes compiles, with the installed TypeScript in strict mode, a
// file that assigns each value (as a deeply read-only literal, so string
// literal types such as a post's type or a channel's type are kept) to
// its type, after prelude (imports and type aliases). It fails t with
// tsc's report, labelled, when a value does not fit its type: a missing
// field, a wrong JSON type, a value outside a union. Fields a value has
// and its type lacks are allowed, as TypeScript's assignability allows
// them (a server sends fields a client does not declare).
func CheckTypes(t testing.TB, prelude string, checks []TypeCheck) {
	t.Helper()
	modules, node := Modules(t)
	tmp := t.TempDir()
	if err := os.Symlink(modules, filepath.Join(tmp, "node_modules")); err != nil {
		t.Fatal(err)
	}
	var src strings.Builder
	src.WriteString(prelude)
	src.WriteString("\ntype DeepReadonly<T> = T extends (infer U)[] ? ReadonlyArray<DeepReadonly<U>> : T extends object ? {readonly [K in keyof T]: DeepReadonly<T[K]>} : T;\n")
	lines := map[int]string{}
	for i, c := range checks {
		lines[strings.Count(src.String(), "\n")+1] = c.Label
		fmt.Fprintf(&src, "const v%d = %s as const;\n", i, c.Value)
		lines[strings.Count(src.String(), "\n")+1] = c.Label
		fmt.Fprintf(&src, "export const c%d: DeepReadonly<%s> = v%d; // %s\n", i, c.Type, i, c.Label)
	}
	file := filepath.Join(tmp, "check.ts")
	if err := os.WriteFile(file, []byte(src.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(modules, "typescript", "bin", "tsc"),
		"--noEmit", "--strict", "--skipLibCheck", "--target", "es2022", "--module", "node16", "--moduleResolution", "node16",
		"--pretty", "false", file)
	cmd.Dir = tmp
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("the fake's answers do not fit the official client's types (tsc: %v):\n%s", err, label(out.String(), lines))
		t.Logf("check.ts:\n%s", src.String())
	}
}

// label prefixes each tsc error line "check.ts(N,...)" with its check.
func label(report string, lines map[int]string) string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(report), "\n") {
		var n int
		if i := strings.Index(l, "check.ts("); i >= 0 {
			fmt.Sscanf(l[i+len("check.ts("):], "%d", &n)
		}
		if lb, ok := lines[n]; ok {
			l = "[" + lb + "] " + l
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}
