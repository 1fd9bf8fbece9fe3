// Package chatapi is a test double of an OpenAI-compatible chat
// completions endpoint, for the consult tool (pkg/model/consult's exchange, the
// toolkit's consult, brokerd's consult tests). It records every request
// byte for byte, so a test can compare what arrived with what brokerd's
// consult log holds. It is no model and must never be linked into a role
// (checks/arch refuses a product package importing checks/).
//
// # Invariant
//
// The stream copies llama-server's OpenAI wire: ggml-org/llama.cpp
// tools/server at commit 3f545bec, server-common.cpp:1584-1601
// (format_oai_sse) and server-context.cpp:4316 and :4339
// (handle_completions_impl's end line and pings). Each event is
// "data: <json>\n\n", reasoning arrives as
// delta.reasoning_content before delta.content, the last chunk carries
// finish_reason "stop", the stream ends with "data: [DONE]\n\n", and ":"
// comment pings may come while it is silent. A status other than 200
// carries {"error":{"code","message","type"}} before any stream
// (server-context.cpp:4242-4253). [Server.Requests] holds every request
// in order: method, path, the Authorization header and the body.
//
// # Modes
//
// [Answer] (the default) streams a reasoning, an answer and [DONE];
// [Stall] sends one chunk and then nothing, holding the connection;
// [Endless] keeps sending content chunks and never ends; [Refuse] answers
// 401 with OpenAI's error object.
package chatapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// Mode is how the fake answers.
type Mode int

// The modes.
const (
	Answer Mode = iota
	Stall
	Endless
	Refuse
)

// Request is one request as it arrived.
type Request struct {
	Method, Path  string
	Authorization string
	Body          []byte
}

// Server is the fake. Its methods are safe for concurrent use.
type Server struct {
	mu       sync.Mutex // guards the fields below
	mode     Mode
	reqs     []Request
	content  string
	thinking string

	srv  *http.Server
	done chan struct{}
}

// Options set the fake's answer.
type Options struct {
	Content   string // the answer's text; default "the remote answer"
	Reasoning string // the reasoning; default "remote reasoning"
}

// New returns a fake with its handler but not yet listening.
func New(o Options) *Server {
	s := &Server{content: o.Content, thinking: o.Reasoning, done: make(chan struct{})}
	if s.content == "" {
		s.content = "the remote answer"
	}
	if s.thinking == "" {
		s.thinking = "remote reasoning"
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	return s
}

// ServeTLS serves on ln with a certificate for names, signed by [CA],
// until the test ends.
func (s *Server) ServeTLS(t testing.TB, ln net.Listener, names ...string) {
	t.Helper()
	cert, err := Leaf(names...)
	if err != nil {
		t.Fatal(err)
	}
	s.srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	go s.srv.Serve(tls.NewListener(ln, s.srv.TLSConfig))
	t.Cleanup(func() {
		close(s.done)
		s.srv.Close()
	})
}

// SetMode changes how later requests are answered.
func (s *Server) SetMode(m Mode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mode = m
}

// Requests returns every request so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	s.mu.Lock()
	s.reqs = append(s.reqs, Request{r.Method, r.URL.Path, r.Header.Get("Authorization"), body})
	mode, content, thinking := s.mode, s.content, s.thinking
	s.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		// llama-server's router answers an unknown route 404.
		writeError(w, http.StatusNotFound, "File Not Found", "not_found_error")
		return
	}
	if mode == Refuse {
		writeError(w, http.StatusUnauthorized, "Invalid API Key", "authentication_error")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	send := func(v any) bool {
		b, _ := json.Marshal(v)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		fl.Flush()
		return true
	}
	send(delta("role", "assistant", nil))
	switch mode {
	case Stall:
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
		return
	case Endless:
		for {
			if !send(delta("content", "and more ", nil)) {
				return
			}
			select {
			case <-r.Context().Done():
				return
			case <-s.done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	fmt.Fprint(w, ":\n\n") // a ping, as llama-server sends while silent
	for _, part := range split(thinking) {
		send(delta("reasoning_content", part, nil))
	}
	for _, part := range split(content) {
		send(delta("content", part, nil))
	}
	stop := "stop"
	send(delta("content", "", &stop))
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

func delta(field, text string, finish *string) map[string]any {
	return map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1767225600, "model": "fake",
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{field: text}, "finish_reason": finish}}}
}

// split cuts text into a few pieces, as a model streams tokens.
func split(s string) []string {
	var out []string
	for len(s) > 7 {
		out, s = append(out, s[:7]), s[7:]
	}
	return append(out, s)
}

func writeError(w http.ResponseWriter, status int, msg, typ string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": status, "message": msg, "type": typ}})
	w.Write(b)
}

// Leaf makes a server certificate for names (host names or IP
// addresses), signed by [CA].
func Leaf(names ...string) (tls.Certificate, error) {
	ca, err := tls.X509KeyPair([]byte(CA), []byte(caKey))
	if err != nil {
		return tls.Certificate{}, err
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		return tls.Certificate{}, err
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tpl.IPAddresses = append(tpl.IPAddresses, ip)
		} else {
			tpl.DNSNames = append(tpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, caCert, &k.PublicKey, ca.PrivateKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}, nil
}

// Roots is a pool holding only [CA].
func Roots() *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM([]byte(CA))
	return p
}

// CA is the test-only certificate authority. The toolkit trusts it only
// when built with the boxmaker_testnet tag (cmd/toolkit/internal/tools,
// testca_testnet.go, which holds the same text: a test checks), and
// brokerd refuses to start with a tool image built so.
const CA = `-----BEGIN CERTIFICATE-----
MIIBsjCCAVigAwIBAgIBATAKBggqhkjOPQQDAjA/MT0wOwYDVQQDDDRib3htYWtl
ciB0ZXN0LW9ubHkgQ0EgKGJveG1ha2VyX3Rlc3RuZXQgYnVpbGRzIG9ubHkpMB4X
DTI2MDEwMTAwMDAwMFoXDTQ2MDEwMTAwMDAwMFowPzE9MDsGA1UEAww0Ym94bWFr
ZXIgdGVzdC1vbmx5IENBIChib3htYWtlcl90ZXN0bmV0IGJ1aWxkcyBvbmx5KTBZ
MBMGByqGSM49AgEGCCqGSM49AwEHA0IABNbJqaB6+T2Y1Wo72Krl2/BOyQGe/ZJz
mMpjiPjKcyMROvwqX7wFPGKhBerZ0JZDY6av5b8NEE3vNyUwIKMVFyCjRTBDMA4G
A1UdDwEB/wQEAwICBDASBgNVHRMBAf8ECDAGAQH/AgEAMB0GA1UdDgQWBBQPacEW
I2Lgt09vACd1w8lw9gl+BDAKBggqhkjOPQQDAgNIADBFAiEAuWjBZyeLlnvqmGqI
pH/jrKkaGWM+Yz019DL02FQDc30CIHHmkD3wg078iYSUodwBlwJ38U1eXZjVuEcY
0Gnr8JgT
-----END CERTIFICATE-----
`

// caKey is the CA's key: test-only, public on purpose.
const caKey = `-----BEGIN EC PRIVATE KEY-----
MHcCAQEEILhIpiH2E0hEXBiFy+a+WzTbQr0nUCApuiUQVdIor6hDoAoGCCqGSM49
AwEHoUQDQgAE1smpoHr5PZjVajvYquXb8E7JAZ79knOYymOI+MpzIxE6/CpfvAU8
YqEF6tnQlkNjpq/lvw0QTe83JTAgoxUXIA==
-----END EC PRIVATE KEY-----
`
