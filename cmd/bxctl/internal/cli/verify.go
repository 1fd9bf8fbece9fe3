package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"text/tabwriter"
	"time"

	"wntrmute.dev/boxmaker/cmd/bxctl/internal/verify"
	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/model/llama"
	"wntrmute.dev/boxmaker/pkg/model/selftest"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

var hexSHA256 = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

// runVerifyDevice is `bxctl verify-device --llama URL`, the flake's
// `nix run .#verify-device`: package verify's checks against the inference
// host's server, every recorded figure required. It prints a table and
// exits 0 when no check failed, 1 when one did, 2 on a usage error.
func runVerifyDevice(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("verify-device", stderr)
	url := fs.String("llama", "", "llama-server (router) base `URL` (required)")
	model := fs.String("model", "", "the model Boxmaker uses (default: the server's model_alias; required for a router)")
	slot := fs.Int("slot", 0, "the `slot` loopd's sessions use")
	nctx := fs.Int("n-ctx", 0, "recorded per-slot context in `tokens` (required)")
	slots := fs.Int("slots", 0, "recorded slot `count` (required)")
	tmpl := fs.String("template-sha256", "", "recorded SHA-256 of the chat template, `hex` (required)")
	baseline := fs.String("baseline", "", "a session's baseline snapshot, sessions/<id>/<epoch>.baseline.json (`file`, required)")
	maxTokens := fs.Int("max-tokens", llama.DefaultMaxTokens, "loopd's `[model] max_tokens`, for the fit check")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	wait := fs.Duration("timeout", 10*time.Minute, "give up after this `duration`")
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	if *url == "" || *nctx <= 0 || *slots <= 0 || !hexSHA256.MatchString(*tmpl) || *baseline == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "bxctl verify-device: --llama, --n-ctx, --slots, --template-sha256 (64 hex) and --baseline are required, and it takes no arguments: verify-device compares with the recorded figures only; see docs/runbook.md#verify-usage")
		fs.Usage()
		return ExitUsage
	}
	b, err := readBaseline(*baseline)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl verify-device: %v; see docs/runbook.md#verify-usage\n", err)
		return ExitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, *wait)
	defer cancel()
	name := *model
	if name == "" {
		if name, err = discoverModel(ctx, *url); err != nil {
			fmt.Fprintf(stderr, "bxctl verify-device: %v\n", err)
			return ExitFailed
		}
	}
	cfg := llama.Config{BaseURL: *url, Model: name, IDSlot: *slot, MaxTokens: *maxTokens}
	c, err := llama.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl verify-device: %v\n", err)
		return ExitUsage
	}
	cfg.ThinkingCap = verify.CapTokens
	capped, err := llama.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl verify-device: %v\n", err)
		return ExitUsage
	}
	r := verify.Run(ctx, verify.Options{Client: c, Capped: capped, Slot: *slot, Baseline: b,
		Expect: selftest.Expect{NCtx: *nctx, Slots: *slots, TemplateSHA256: *tmpl}})
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(struct {
			OK bool `json:"ok"`
			verify.Report
		}{r.OK(), r})
	} else {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CHECK\tRESULT\tDETAIL")
		for _, ck := range r.Checks {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", ck.Name, ck.Status, ck.Detail)
		}
		tw.Flush()
	}
	if !r.OK() {
		return ExitFailed
	}
	return ExitOK
}

// readBaseline reads a baseline snapshot (the file loopd writes when an
// epoch starts), strictly.
func readBaseline(path string) (sessionlog.Baseline, error) {
	var b sessionlog.Baseline
	data, err := os.ReadFile(path)
	if err != nil {
		return b, fmt.Errorf("read the baseline: %w", err)
	}
	if len(data) > 4<<20 {
		return b, fmt.Errorf("read the baseline: %s is over 4 MiB", path)
	}
	if err := strict.Unmarshal(data, &b); err != nil {
		return b, fmt.Errorf("read the baseline %s: %w", path, err)
	}
	if b.System == "" {
		return b, fmt.Errorf("read the baseline %s: it has no system message", path)
	}
	return b, nil
}
