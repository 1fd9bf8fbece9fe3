package tools

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/checks/fake/chatapi"
	"wntrmute.dev/boxmaker/cmd/toolkit/internal/nettest"
	"wntrmute.dev/boxmaker/pkg/model/consult"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
)

// TestConsult: consult sends the body it was given, byte for byte, with
// the granted key, over TLS it verifies, through the egress proxy, and
// prints the answer with the reasoning apart; the key is never printed
// or written to the secret directory.
func TestConsult(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := chatapi.New(chatapi.Options{Content: "the answer", Reasoning: "the thinking"})
	srv.ServeTLS(t, ln, "api.example.com")
	d := &nettest.Dialer{To: map[string]string{"93.184.215.20:443": ln.Addr().String()}}
	env, _ := fetchEnv(t, []string{"api.example.com"}, nettest.Resolver{"api.example.com": {netip.MustParseAddr("93.184.215.20")}}, d, chatapi.Roots())
	body, _ := consult.Body("m", 600, toolargs.Consult{Question: "q?"})
	args := map[string]any{"url": "https://api.example.com/v1/chat/completions", "body": string(body), "idle_ms": 5000, "total_ms": 20000}
	var out, errb strings.Builder
	env.Stdout, env.Stderr = &out, &errb
	code := Run(context.Background(), env, "consult", strings.NewReader(input(t, args, "API_KEY", "sk-consult-secret")))
	if code != ExitDone {
		t.Fatalf("exit %d, stderr %s", code, errb.String())
	}
	var r consult.Result
	if err := strict.Unmarshal([]byte(strings.TrimSpace(out.String())), &r); err != nil {
		t.Fatalf("stdout %q: %v", out.String(), err)
	}
	if r.Answer.Content != "the answer" || r.Answer.Reasoning != "the thinking" || r.Error != "" {
		t.Errorf("result %+v", r)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || !bytes.Equal(reqs[0].Body, body) || reqs[0].Authorization != "Bearer sk-consult-secret" {
		t.Errorf("requests %+v", reqs)
	}
	if strings.Contains(out.String()+errb.String(), "sk-consult-secret") {
		t.Error("the key was printed")
	}
	if _, err := os.Stat(env.SecretDir); err == nil {
		t.Error("consult wrote its key to the secret directory")
	}
	// Without a key, nothing is sent.
	out.Reset()
	errb.Reset()
	if code := Run(context.Background(), env, "consult", strings.NewReader(input(t, args, "", ""))); code != ExitTool || !strings.Contains(errb.String(), "no API key") {
		t.Errorf("no key: exit %d, %q", code, errb.String())
	}
	if len(srv.Requests()) != 1 {
		t.Error("a keyless consult reached the endpoint")
	}
	// Plain http is not a consult URL.
	args["url"] = "http://api.example.com/v1/chat/completions"
	if code := Run(context.Background(), env, "consult", strings.NewReader(input(t, args, "API_KEY", "k"))); code != ExitMisuse {
		t.Errorf("http URL: exit %d", code)
	}
}
