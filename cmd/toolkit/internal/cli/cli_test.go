package cli

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/cmd/toolkit/internal/egress"
	"wntrmute.dev/boxmaker/cmd/toolkit/internal/socks5"
	"wntrmute.dev/boxmaker/cmd/toolkit/internal/tools"
)

func TestUsageMisuse(t *testing.T) {
	for _, args := range [][]string{nil, {"read_file", "extra"}, {"bogus-SECRETISH"}, {"egress"}, {"egress", "--socket", "/x"}, {"egress", "--socket", "/x", "--host", "10.0.0.1"}, {"egress", "--socket", "/x", "--host", "Upper.Example"}, {"egress", "--socket", "/x", "--host", "a.example", "stray"}, {"egress", "--bogus-SECRETISH"}} {
		var out, errb strings.Builder
		code := Main(args, strings.NewReader(""), &out, &errb)
		if code != tools.ExitMisuse || errb.String() != tools.MisuseUsage+"\n" || out.Len() != 0 {
			t.Errorf("Main(%q) = %d, %q, %q; want 2 and the usage sentence", args, code, out.String(), errb.String())
		}
	}
}

type oneResolver struct{}

func (oneResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

type noDialer struct{}

func (noDialer) DialContext(context.Context, string, string) (net.Conn, error) {
	return nil, errors.New("no network in this test")
}

// TestEgressCommand: the command listens, makes the socket reachable by
// the tool container's user, prints "ready" only then, logs JSON, and
// stops cleanly when cancelled.
func TestEgressCommand(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "egress.sock")
	pr, pw := io.Pipe()
	var errb strings.Builder
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Egress(ctx, []string{"--socket", sock, "--host", "a.example", "--host", "b.example"}, pw, &errb, &egress.Proxy{Resolver: oneResolver{}, Dialer: noDialer{}})
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("first stdout line %q, %v", line, err)
	}
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o666 || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("socket: %v, %v", fi, err)
	}
	_, err = socks5.Dial(ctx, sock, "a.example", 443)
	var re *socks5.RefusedError
	if !errors.As(err, &re) || re.Rep != socks5.RepNotAllowed {
		t.Errorf("Dial to a name resolving to loopback = %v", err)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("Egress = %d, stderr %s", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Egress did not stop")
	}
	if !strings.Contains(errb.String(), `"msg":"egress refused"`) || !strings.Contains(errb.String(), `"hosts":["a.example","b.example"]`) {
		t.Errorf("log:\n%s", errb.String())
	}
	// A path that exists already is refused, not replaced.
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var errb2 strings.Builder
	if code := Egress(context.Background(), []string{"--socket", sock, "--host", "a.example"}, io.Discard, &errb2, nil); code != tools.ExitTool {
		t.Errorf("Egress on an existing path = %d", code)
	}
}
