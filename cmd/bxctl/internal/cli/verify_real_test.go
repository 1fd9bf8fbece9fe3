package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestVerifyDeviceReal runs verify-device against real llama-servers:
// $BOXMAKER_LLAMA_URL serving the keep-thinking template (as the
// conformance suite's) and $BOXMAKER_LLAMA_STOCK_URL the stock one, both
// the same build and model. The recorded figures are the keep-thinking
// server's own (its template's hash, context and slots), and the baseline
// is loopd's real one (testdata/loopd.baseline.json: the default system
// prompt and core tools, as loopd wrote it). With the tiny test model
// (shared/data/stories260K.gguf) two checks must fail on either server:
// tool-call (it never calls a tool) and reasoning (its vocabulary spells
// <think> in several tokens, so the budget sampler never sees thinking
// start: shared/reference/llama-server.md §3). Every other check passes
// on the keep-thinking server; on the stock one the template's hash and
// the cache check fail (it drops earlier thinking), and the baseline
// budget becomes informational.
func TestVerifyDeviceReal(t *testing.T) {
	keep, stock := os.Getenv("BOXMAKER_LLAMA_URL"), os.Getenv("BOXMAKER_LLAMA_STOCK_URL")
	if keep == "" || stock == "" {
		t.Skip("BOXMAKER_LLAMA_URL and BOXMAKER_LLAMA_STOCK_URL are not both set: verify-device ran against the fake only")
	}
	tmpl, nctx, slots := props(t, keep)
	h := sha256.Sum256([]byte(tmpl))
	run := func(url string) map[string]string {
		var out, errb bytes.Buffer
		code := Main([]string{"verify-device", "--llama", url, "--n-ctx", fmt.Sprint(nctx), "--slots", fmt.Sprint(slots),
			"--template-sha256", hex.EncodeToString(h[:]), "--baseline", "testdata/loopd.baseline.json", "--json"}, &out, &errb)
		var r struct {
			OK     bool `json:"ok"`
			Checks []struct {
				Name   string `json:"name"`
				Status string `json:"status"`
				Detail string `json:"detail"`
			} `json:"checks"`
		}
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("verify-device %s: %v\n%s%s", url, err, out.String(), errb.String())
		}
		if code != ExitFailed || r.OK {
			t.Errorf("verify-device %s: exit %d, ok %v; want exit %d (the tiny model fails tool-call and reasoning)", url, code, r.OK, ExitFailed)
		}
		got := map[string]string{}
		for _, c := range r.Checks {
			got[c.Name] = c.Status
			t.Logf("%s %s: %s %s", url, c.Name, c.Status, c.Detail)
		}
		return got
	}
	for _, tt := range []struct {
		url  string
		want map[string]string
	}{
		{keep, map[string]string{"server": "PASS", "context": "PASS", "settings": "PASS", "fit": "PASS", "tool-call": "FAIL", "cache": "PASS", "baseline": "PASS", "reasoning": "FAIL"}},
		{stock, map[string]string{"server": "PASS", "context": "PASS", "settings": "FAIL", "fit": "PASS", "tool-call": "FAIL", "cache": "FAIL", "baseline": "INFO", "reasoning": "FAIL"}},
	} {
		got := run(tt.url)
		for name, want := range tt.want {
			if got[name] != want {
				t.Errorf("%s: %s is %q, want %q", tt.url, name, got[name], want)
			}
		}
		if len(got) != len(tt.want) {
			t.Errorf("%s: checks %v, want exactly %v", tt.url, got, tt.want)
		}
	}
}

// props reads a real server's chat template, per-slot context and slot
// count from /props.
func props(t *testing.T, base string) (string, int, int) {
	t.Helper()
	hc := &http.Client{Timeout: time.Minute}
	resp, err := hc.Get(strings.TrimSuffix(base, "/") + "/props")
	if err != nil {
		t.Fatalf("props: %v", err)
	}
	defer resp.Body.Close()
	var p struct {
		ChatTemplate string `json:"chat_template"`
		TotalSlots   int    `json:"total_slots"`
		Default      struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		t.Fatalf("props: %v", err)
	}
	return p.ChatTemplate, p.Default.NCtx, p.TotalSlots
}
