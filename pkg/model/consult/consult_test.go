package consult

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/fake/chatapi"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
)

// TestBody: the body is the fixed system text and the two arguments,
// streaming, at the temperature given, with no tools key; a temperature
// above 0.6 is refused.
func TestBody(t *testing.T) {
	b, err := Body("glm-5.3-flash", 600, toolargs.Consult{Question: "why <is> the sky blue?", Context: "asked & answered"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"glm-5.3-flash","messages":[{"role":"system","content":"` + System + `"},` +
		`{"role":"user","content":"why <is> the sky blue?\n\n--- context supplied by the assistant ---\nasked & answered"}],"temperature":0.6,"stream":true}`
	if string(b) != want {
		t.Errorf("Body =\n%s\nwant\n%s", b, want)
	}
	var keys map[string]json.RawMessage
	if err := strict.Unmarshal(b, &keys); err != nil {
		t.Fatal(err)
	}
	if _, ok := keys["tools"]; ok {
		t.Error("the body has a tools key")
	}
	for _, m := range []int{0, 55, 250, 600} {
		b, err := Body("m", m, toolargs.Consult{Question: "q"})
		if err != nil {
			t.Fatalf("Body(%d): %v", m, err)
		}
		var v struct {
			Temperature json.Number `json:"temperature"`
		}
		json.Unmarshal(b, &v)
		if f, _ := v.Temperature.Float64(); f*1000 != float64(m) || f > 0.6 {
			t.Errorf("Body(%d) temperature %s", m, v.Temperature)
		}
	}
	for _, m := range []int{601, 1000, -1} {
		if _, err := Body("m", m, toolargs.Consult{Question: "q"}); err == nil {
			t.Errorf("Body(%d) accepted a temperature above 0.6 or below 0", m)
		}
	}
	if _, err := Body("", 600, toolargs.Consult{Question: "q"}); err == nil {
		t.Error("Body accepted no model")
	}
}

// fake serves chatapi on a loopback TLS listener and returns a client
// that trusts only its CA, and the call for it.
func fake(t *testing.T, idle, total time.Duration) (*chatapi.Server, *http.Client, toolargs.ConsultCall) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := chatapi.New(chatapi.Options{Content: "forty-two, as computed", Reasoning: "let me think about it"})
	srv.ServeTLS(t, ln, "api.test")
	addr := ln.Addr().String()
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		TLSClientConfig: &tls.Config{RootCAs: chatapi.Roots(), MinVersion: tls.VersionTLS12},
	}}
	body, err := Body("fake", 600, toolargs.Consult{Question: "what is six times seven?"})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := toolargs.ParseURL("https://api.test/v1/chat/completions")
	return srv, client, toolargs.ConsultCall{URL: u, Body: string(body), IdleMS: idle.Milliseconds(), TotalMS: total.Milliseconds()}
}

// TestExchange: the body arrives byte for byte with the key, and the
// reasoning comes back apart from the answer.
func TestExchange(t *testing.T) {
	srv, client, call := fake(t, 5*time.Second, 20*time.Second)
	a, err := Exchange(context.Background(), client, call, "sk-test-key")
	if err != nil {
		t.Fatal(err)
	}
	if a.Content != "forty-two, as computed" || a.Reasoning != "let me think about it" || a.Finish != "stop" || a.Status != 200 || a.Truncated {
		t.Errorf("answer %+v", a)
	}
	if a.StreamBytes == 0 || len(a.StreamSHA256) != 64 {
		t.Errorf("stream not named: %+v", a)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || !bytes.Equal(reqs[0].Body, []byte(call.Body)) || reqs[0].Authorization != "Bearer sk-test-key" || reqs[0].Path != "/v1/chat/completions" {
		t.Fatalf("recorded %+v", reqs)
	}
}

// TestExchangeBounds: a stream that stalls fails at the liveness limit,
// one that never ends at the total bound, each with its runbook entry and
// well before either could hang; a refusal names the endpoint's message.
func TestExchangeBounds(t *testing.T) {
	for _, tt := range []struct {
		name string
		mode chatapi.Mode
		want error
	}{
		{"stalled", chatapi.Stall, ErrStalled},
		{"never ending", chatapi.Endless, ErrUnbounded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, client, call := fake(t, 300*time.Millisecond, 1500*time.Millisecond)
			srv.SetMode(tt.mode)
			start := time.Now()
			_, err := Exchange(context.Background(), client, call, "k")
			if !errors.Is(err, tt.want) {
				t.Fatalf("Exchange = %v, want %v", err, tt.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
	srv, client, call := fake(t, time.Second, 5*time.Second)
	srv.SetMode(chatapi.Refuse)
	_, err := Exchange(context.Background(), client, call, "k")
	var re *RemoteError
	if !errors.As(err, &re) || re.Status != 401 || !strings.Contains(err.Error(), "Invalid API Key") {
		t.Errorf("Exchange = %v, want the 401 and its message", err)
	}
}

// TestReadStream covers the stream's edges without a server.
func TestReadStream(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		content  string
		err      string
	}{
		{"crlf and ping", ": ping\r\n\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\r\n\r\ndata: [DONE]\r\n\r\n", "a", ""},
		{"joined data", "data: {\"choices\":[{\"delta\":\ndata: {\"content\":\"b\"}}]}\n\ndata: [DONE]\n\n", "b", ""},
		{"cut", "data: {\"choices\":[{\"delta\":{\"content\":\"c\"}}]}\n\n", "c", "[DONE]"},
		{"error event", "data: {\"error\":{\"code\":500,\"message\":\"boom\"}}\n\n", "", "boom"},
		{"not json", "data: {oops\n\n", "", "not JSON"},
	} {
		var a Answer
		err := readStream(strings.NewReader(tt.in), &a)
		if (tt.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.err)) || a.Content != tt.content {
			t.Errorf("%s: readStream = %q, %v; want %q, %q", tt.name, a.Content, err, tt.content, tt.err)
		}
	}
	var a Answer
	big := "data: {\"choices\":[{\"delta\":{\"content\":\"" + strings.Repeat("x", 100<<10) + "\"}}]}\n\n"
	if err := readStream(strings.NewReader(strings.Repeat(big, 4)+"data: [DONE]\n\n"), &a); err != nil || !a.Truncated || len(a.Content) != MaxContent {
		t.Errorf("over the cap: %v, truncated %v, %d bytes", err, a.Truncated, len(a.Content))
	}
}

// FuzzReadStream: any stream is read without panic, within the caps.
func FuzzReadStream(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\",\"reasoning_content\":\"r\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte(":\n\ndata: {\"error\":{\"message\":\"x\"}}\n\n"))
	f.Add([]byte("data: a\r\ndata: b\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var a Answer
		readStream(bytes.NewReader(in), &a)
		if len(a.Content) > MaxContent || len(a.Reasoning) > MaxReasoning {
			t.Fatalf("over the caps: %d, %d", len(a.Content), len(a.Reasoning))
		}
	})
}
