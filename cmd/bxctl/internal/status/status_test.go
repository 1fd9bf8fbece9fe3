package status

import (
	"bytes"
	"context"
	"flag"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/logs/audit"
	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// hang accepts every connection and never answers, as a role or a
// llama-server that is stuck.
func hang(t *testing.T, l net.Listener) {
	t.Cleanup(func() { l.Close() })
	go func() {
		var held []net.Conn
		for {
			c, err := l.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
}

// Mask is what differs between runs: the state directory and times.
var (
	maskDur  = regexp.MustCompile(`[0-9.]+(ms|s|µs)\b`)
	maskPort = regexp.MustCompile(`127\.0\.0\.1:[0-9]+`)
)

func mask(s, state string) string {
	s = strings.ReplaceAll(s, state, "STATE")
	s = maskPort.ReplaceAllString(s, "127.0.0.1:PORT")
	return maskDur.ReplaceAllString(s, "D")
}

// TestStatusBounded: with loopd and brokerd accepting and never
// answering, memoryd and gatewayd down and a llama-server that accepts
// and never answers, status ends within its total bound and says what
// did not answer; the session's figures come from its logs.
func TestStatusBounded(t *testing.T) {
	root, err := os.MkdirTemp("", "st")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	state := filepath.Join(root, "s")
	for _, s := range []*wire.Socket{&wire.Loop, &wire.Admin} {
		p := layout.Socket(state, s)
		os.MkdirAll(filepath.Dir(p), 0o700)
		l, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		hang(t, l)
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hang(t, tcp)
	os.MkdirAll(layout.Config.In(state), 0o700)
	os.WriteFile(layout.ConfigPath(state, "inferproxy"), []byte("upstream = \""+tcp.Addr().String()+"\"\n"), 0o600)
	os.WriteFile(layout.ConfigPath(state, "loopd"), []byte("[model]\nname = \"m\"\nmain_slot = 0\n"), 0o600)
	for epoch, recs := range [][]sessionlog.Record{
		{&sessionlog.User{Turn: 1, Text: "q"}, &sessionlog.Usage{Turn: 1, CacheN: 900, PromptN: 90, PredictedN: 10, PromptUS: 1500000}, &sessionlog.TurnEnd{Turn: 1}},
		{&sessionlog.User{Turn: 2, Text: "q"}, &sessionlog.Usage{Turn: 2, CacheN: 100, PromptN: 50, PredictedN: 5, CacheGap: 1},
			&sessionlog.Usage{Turn: 2, CacheN: 40, PromptN: 150, PredictedN: 20, CacheGap: 115, PromptUS: 2500000}, &sessionlog.TurnEnd{Turn: 2}},
	} {
		var b bytes.Buffer
		for _, r := range recs {
			line, _ := sessionlog.Records.Encode(r)
			b.Write(append(line, '\n'))
		}
		dir := filepath.Join(layout.Sessions.In(state), "s-1")
		os.MkdirAll(dir, 0o700)
		os.WriteFile(filepath.Join(dir, []string{"0.jsonl", "1.jsonl"}[epoch]), b.Bytes(), 0o600)
	}
	now := time.Now()
	anchors := func(string) ([]audit.Anchor, error) {
		return []audit.Anchor{{Seq: 1, Time: now.Add(-26 * time.Hour).UTC().Format(audit.TimeLayout)}}, nil
	}
	const probe, total = 300 * time.Millisecond, time.Second
	start := time.Now()
	st := Run(context.Background(), Options{State: state, Anchors: anchors, Probe: probe, Total: total, Now: now})
	if took := time.Since(start); took > total+time.Second {
		t.Errorf("status took %v, past its bound of %v", took, total)
	}
	up := map[string]bool{}
	for _, r := range st.Roles {
		up[r.Name] = r.Up
	}
	if !up["loopd"] || !up["brokerd"] || up["memoryd"] || up["gatewayd"] {
		t.Errorf("roles = %+v", st.Roles)
	}
	if st.JobsErr == "" || st.ApprovalsErr == "" || strings.Contains(st.Server, "answers") {
		t.Errorf("a stuck loopd, brokerd or llama-server reported as answering: %+v", st)
	}
	if st.Session != "s-1" || st.Epoch != 1 || st.Compactions != 1 || st.Turn != 2 || st.Reread != 116 || st.ContextTokens != 210 || st.TodayPrefillUS != 4000000 || st.AnchorAge != "26h0m0s" {
		t.Errorf("session figures = %+v", st)
	}
	var text bytes.Buffer
	st.WriteText(&text)
	got := mask(text.String(), state)
	if *update {
		os.WriteFile("testdata/bounded.txt", []byte(got), 0o644)
	}
	want, _ := os.ReadFile("testdata/bounded.txt")
	if got != string(want) {
		t.Errorf("status text differs (go test -update):\n%s", got)
	}
}
