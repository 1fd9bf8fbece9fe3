package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/pkg/model/llama"
	"wntrmute.dev/boxmaker/pkg/model/selftest"
)

// runSelftest is `bxctl selftest --llama URL`: the startup self-test of
// loopd, run straight against a server, so an owner can check a server
// before pointing Boxmaker at it. It prints one line per check with the
// figures it saw, and exits 0 only when every check passes.
func runSelftest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("selftest", stderr)
	url := fs.String("llama", "", "llama-server base `URL`, e.g. http://127.0.0.1:8080 (required)")
	model := fs.String("model", "", "model name sent in requests (default: the server's model_alias)")
	slot := fs.Int("slot", 0, "the `slot` to test, as loopd's main sessions use")
	nctx := fs.Int("n-ctx", 0, "recorded per-slot context in `tokens` (0: not compared)")
	slots := fs.Int("slots", 0, "recorded slot `count` (0: not compared)")
	maxTokens := fs.Int("max-tokens", llama.DefaultMaxTokens, "loopd's `[model] max_tokens`, for the fit check")
	tmpl := fs.String("template-sha256", "", "recorded SHA-256 of the chat template, `hex` (empty: not compared)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	wait := fs.Duration("timeout", 5*time.Minute, "give up on the whole self-test after this `duration`")
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	if *url == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "bxctl selftest: --llama URL is required and takes no arguments")
		fs.Usage()
		return ExitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, *wait)
	defer cancel()
	name := *model
	if name == "" {
		var err error
		if name, err = discoverModel(ctx, *url); err != nil {
			fmt.Fprintf(stderr, "bxctl selftest: %v\n", err)
			return ExitFailed
		}
	}
	c, err := llama.New(llama.Config{BaseURL: *url, Model: name, IDSlot: *slot, MaxTokens: *maxTokens})
	if err != nil {
		fmt.Fprintf(stderr, "bxctl selftest: %v\n", err)
		return ExitUsage
	}
	r := selftest.Run(ctx, c, *slot, selftest.Expect{NCtx: *nctx, Slots: *slots, TemplateSHA256: *tmpl})
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(struct {
			OK     bool             `json:"ok"`
			Checks []selftest.Check `json:"checks"`
		}{r.OK(), r.Checks})
	} else {
		for _, ck := range r.Checks {
			mark := "PASS"
			if !ck.OK {
				mark = "FAIL"
			}
			fmt.Fprintf(stdout, "%s %-9s %s\n", mark, ck.Name, ck.Detail)
		}
	}
	if !r.OK() {
		return ExitFailed
	}
	return ExitOK
}

// discoverModel asks GET /props, without naming a model, which model the
// server serves. A router answers for itself and cannot say which of its
// models Boxmaker will use, so the owner must name it.
func discoverModel(ctx context.Context, base string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/props", nil)
	if err != nil {
		return "", fmt.Errorf("ask the server for its model: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("ask the server for its model: %w; see docs/runbook.md#selftest-server", err)
	}
	defer resp.Body.Close()
	var p struct {
		Role       string `json:"role"`
		ModelAlias string `json:"model_alias"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&p); err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("ask the server for its model: GET /props answered %s; see docs/runbook.md#selftest-server", resp.Status)
	}
	if p.Role == "router" || p.ModelAlias == "" {
		return "", errors.New("the server is a router (or names no model): pass --model NAME, the model Boxmaker will use")
	}
	return p.ModelAlias, nil
}
