package tools

import (
	"context"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"wntrmute.dev/boxmaker/cmd/toolkit/internal/egress"
	"wntrmute.dev/boxmaker/cmd/toolkit/internal/nettest"
	"wntrmute.dev/boxmaker/pkg/tool/hostrule"
)

// fetchEnv starts an in-process egress proxy granted hosts, and returns a
// tool Env that reaches it.
func fetchEnv(t *testing.T, hosts []string, r nettest.Resolver, d *nettest.Dialer, roots *x509.CertPool) (Env, func() string) {
	env, _, _ := testEnv(t)
	sock := filepath.Join(t.TempDir(), "egress.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var names []hostrule.Name
	for _, h := range hosts {
		n, err := hostrule.ParseName(h)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	logs := &strings.Builder{}
	var mu sync.Mutex
	p := &egress.Proxy{Hosts: names, Resolver: r, Dialer: d, Log: slog.New(slog.NewJSONHandler(lockedWriter{&mu, logs}, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	env.EgressSocket = sock
	env.RootCAs = roots
	return env, func() string {
		mu.Lock()
		defer mu.Unlock()
		return logs.String()
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func runFetch(t *testing.T, env Env, url string) (int, string, string) {
	var out, errb strings.Builder
	env.Stdout, env.Stderr = &out, &errb
	code := Run(context.Background(), env, "http_fetch", strings.NewReader(input(t, map[string]string{"url": url}, "", "")))
	return code, out.String(), errb.String()
}

func TestFetch(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "hello from "+r.Host)
	})
	mux.HandleFunc("/to-private", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://evil.example/x", http.StatusFound)
	})
	mux.HandleFunc("/to-granted", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://example.com/hello", http.StatusFound)
	})
	mux.HandleFunc("/to-literal", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1/x", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(make([]byte, MaxRead+10))
	})
	plain := httptest.NewServer(mux)
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(mux) // its certificate is for example.com
	defer tlsSrv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(tlsSrv.Certificate())

	res := nettest.Resolver{
		"plain.example": {netip.MustParseAddr("93.184.215.14")},
		"example.com":   {netip.MustParseAddr("93.184.215.15")},
		"evil.example":  {netip.MustParseAddr("10.0.0.1")},
		"wrong.example": {netip.MustParseAddr("93.184.215.15")}, // TLS name mismatch
	}
	d := &nettest.Dialer{To: map[string]string{
		"93.184.215.14:80":  strings.TrimPrefix(plain.URL, "http://"),
		"93.184.215.15:443": strings.TrimPrefix(tlsSrv.URL, "https://"),
	}}
	env, logs := fetchEnv(t, []string{"plain.example", "example.com", "evil.example", "wrong.example"}, res, d, roots)

	tests := []struct {
		name, url string
		code      int
		out, err  string
	}{
		{"plain", "http://plain.example/hello", ExitDone, "HTTP/1.1 200 OK\nContent-Type: text/plain\n\nhello from plain.example", ""},
		{"tls end to end", "https://example.com/hello", ExitDone, "200 OK\nContent-Type: text/plain\n\nhello from example.com", ""},
		{"redirect to granted", "http://plain.example/to-granted", ExitDone, "Final-URL: https://example.com/hello\nContent-Type: text/plain\n\nhello from example.com", ""},
		{"redirect to a private name", "http://plain.example/to-private", ExitTool, "", "egress proxy refused evil.example: not allowed"},
		{"redirect to an IP literal", "http://plain.example/to-literal", ExitTool, "", "redirect refused"},
		{"redirect loop", "http://plain.example/loop", ExitTool, "", "stopped after 5 redirects"},
		{"granted name resolving privately", "http://evil.example/", ExitTool, "", "egress proxy refused evil.example"},
		{"ungranted", "https://other.example/", ExitTool, "", "egress proxy refused other.example"},
		{"tls name mismatch", "https://wrong.example/hello", ExitTool, "", "certificate"},
		{"big body is cut", "http://plain.example/big", ExitDone, "", "body cut at 1048576 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runFetch(t, env, tt.url)
			if code != tt.code || !strings.Contains(out, tt.out) || !strings.Contains(errs, tt.err) {
				t.Errorf("http_fetch %s = %d, stdout %.200q, stderr %q; want %d, %q, %q", tt.url, code, out, errs, tt.code, tt.out, tt.err)
			}
			if tt.name == "big body is cut" && len(out) > MaxRead+100 {
				t.Errorf("output is %d bytes", len(out))
			}
		})
	}
	for _, a := range d.Dialed() {
		if strings.HasPrefix(a, "10.") || strings.HasPrefix(a, "127.") {
			t.Errorf("the proxy dialled %s", a)
		}
	}
	if !strings.Contains(logs(), `"host":"evil.example"`) {
		t.Errorf("no decision logged for evil.example:\n%s", logs())
	}
}

func TestFetchNoNetwork(t *testing.T) {
	env, _, _ := testEnv(t)
	code, out, errs := runFetch(t, env, "https://example.com/")
	if code != ExitTool || out != "" || !strings.Contains(errs, "no network was granted to this call") {
		t.Errorf("http_fetch without a proxy = %d, %q, %q", code, out, errs)
	}
}
