package egress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/cmd/toolkit/internal/nettest"
	"wntrmute.dev/boxmaker/cmd/toolkit/internal/socks5"
	"wntrmute.dev/boxmaker/pkg/tool/hostrule"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) lines(t *testing.T) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", sc.Text())
		}
		out = append(out, m)
	}
	return out
}

// echoServer accepts connections and echoes what it reads.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// startProxy runs a proxy granted hosts on a Unix socket in a temporary
// directory and returns the socket's path and the log.
func startProxy(t *testing.T, hosts []string, r Resolver, d Dialer) (string, *syncBuf) {
	var names []hostrule.Name
	for _, h := range hosts {
		n, err := hostrule.ParseName(h)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	sock := filepath.Join(t.TempDir(), "egress.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuf{}
	p := &Proxy{Hosts: names, Resolver: r, Dialer: d, Log: slog.New(slog.NewJSONHandler(logs, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve = %v", err)
		}
	})
	return sock, logs
}

func TestConnectDecisions(t *testing.T) {
	echo := echoServer(t)
	res := nettest.Resolver{
		"granted.example":   nettest.Addrs("93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"),
		"loopback.example":  nettest.Addrs("127.0.0.1"),
		"private.example":   nettest.Addrs("10.0.0.1"),
		"tailnet.example":   nettest.Addrs("100.64.0.1"),
		"mapped.example":    nettest.Addrs("::ffff:127.0.0.1"),
		"mappedpub.example": nettest.Addrs("::ffff:93.184.215.14"),
		"nat64.example":     nettest.Addrs("64:ff9b::a00:1"),
		"compat.example":    nettest.Addrs("::a00:1"),
		"mixed.example":     nettest.Addrs("93.184.215.14", "10.0.0.1"),
		"meta.example":      nettest.Addrs("169.254.169.254"),
		"ungranted.example": nettest.Addrs("93.184.215.14"),
	}
	d := &nettest.Dialer{To: map[string]string{"93.184.215.14:443": echo, "93.184.215.14:80": echo}}
	granted := []string{"granted.example", "mappedpub.example", "loopback.example", "private.example", "tailnet.example", "mapped.example", "nat64.example", "compat.example", "mixed.example", "meta.example", "nowhere.example"}
	sock, logs := startProxy(t, granted, res, d)

	tests := []struct {
		name string
		req  socks5.Request
		rep  byte
	}{
		{"granted", socks5.Request{Cmd: socks5.CmdConnect, Atyp: socks5.AtypDomain, Host: "granted.example", Port: 443}, socks5.RepSucceeded},
		{"granted in capitals", socks5.Request{Cmd: socks5.CmdConnect, Atyp: socks5.AtypDomain, Host: "GRANTED.Example", Port: 80}, socks5.RepSucceeded},
		{"resolves to a mapped public address", socks5.Request{Cmd: socks5.CmdConnect, Atyp: socks5.AtypDomain, Host: "mappedpub.example", Port: 443}, socks5.RepSucceeded},
		{"ungranted", socks5.Request{Cmd: socks5.CmdConnect, Atyp: socks5.AtypDomain, Host: "ungranted.example", Port: 443}, socks5.RepNotAllowed},
		{"subdomain of granted", socks5.Request{Cmd: socks5.CmdConnect, Atyp: socks5.AtypDomain, Host: "www.granted.example", Port: 443}, socks5.RepNotAllowed},
		{"trailing dot", socks5.Request{Cmd: socks5.CmdConnect, Atyp: socks5.AtypDomain, Host: "granted.example.", Port: 443}, socks5.RepNotAllowed},
		{"IPv4 literal", socks5.Request{Cmd: socks5.CmdConnect, Atyp: socks5.AtypIPv4, Addr: []byte{93, 184, 215, 14}, Port: 443}, socks5.RepNotAllowed},
		{"IPv6 literal", socks5.Request{Cmd: socks5.CmdConnect, Atyp: socks5.AtypIPv6, Addr: make([]byte, 16), Port: 443}, socks5.RepNotAllowed},
		{"IP literal as a name", socks5.Request{Cmd: socks5.CmdConnect, Atyp: socks5.AtypDomain, Host: "127.0.0.1", Port: 443}, socks5.RepNotAllowed},
		{"bracketed IPv6 as a name", socks5.Request{Cmd: socks5.CmdConnect, Atyp: socks5.AtypDomain, Host: "[::1]", Port: 443}, socks5.RepNotAllowed},
		{"resolves to 127.0.0.1", socks5.Request{Cmd: socks5.CmdConnect, Atyp: socks5.AtypDomain, Host: "loopback.example", Port: 443}, socks5.RepNotAllowed},
		{"resolves to 10.0.0.1", socks5.Request{Cmd: socks5.CmdConnect, Atyp: socks5.AtypDomain, Host: "private.example", Port: 443}, socks5.RepNotAllowed},
		{"resolves to 100.64.0.1", socks5.Request{Cmd: socks5.CmdConnect, Atyp: socks5.AtypDomain, Host: "tailnet.example", Port: 443}, socks5.RepNotAllowed},
		{"resolves to ::ffff:127.0.0.1", socks5.Request{Cmd: socks5.CmdConnect, Atyp: socks5.AtypDomain, Host: "mapped.example", Port: 443}, socks5.RepNotAllowed},
		{"resolves to 64:ff9b::a00:1", socks5.Request{Cmd: socks5.CmdConnect, Atyp: socks5.AtypDomain, Host: "nat64.example", Port: 443}, socks5.RepNotAllowed},
		{"resolves to ::a00:1", socks5.Request{Cmd: socks5.CmdConnect, Atyp: socks5.AtypDomain, Host: "compat.example", Port: 443}, socks5.RepNotAllowed},
		{"resolves to public and private", socks5.Request{Cmd: socks5.CmdConnect, Atyp: socks5.AtypDomain, Host: "mixed.example", Port: 443}, socks5.RepNotAllowed},
		{"resolves to the metadata address", socks5.Request{Cmd: socks5.CmdConnect, Atyp: socks5.AtypDomain, Host: "meta.example", Port: 443}, socks5.RepNotAllowed},
		{"does not resolve", socks5.Request{Cmd: socks5.CmdConnect, Atyp: socks5.AtypDomain, Host: "nowhere.example", Port: 443}, socks5.RepHostUnreachable},
		{"port 22", socks5.Request{Cmd: socks5.CmdConnect, Atyp: socks5.AtypDomain, Host: "granted.example", Port: 22}, socks5.RepNotAllowed},
		{"BIND", socks5.Request{Cmd: socks5.CmdBind, Atyp: socks5.AtypDomain, Host: "granted.example", Port: 443}, socks5.RepCmdNotSupported},
		{"UDP ASSOCIATE", socks5.Request{Cmd: socks5.CmdAssociate, Atyp: socks5.AtypDomain, Host: "granted.example", Port: 443}, socks5.RepCmdNotSupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			msg, err := socks5.AppendRequest([]byte{5, 1, 0}, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Write(msg); err != nil {
				t.Fatal(err)
			}
			var sel [2]byte
			if _, err := io.ReadFull(c, sel[:]); err != nil || sel != [2]byte{5, 0} {
				t.Fatalf("method selection = %x, %v", sel, err)
			}
			rep, err := socks5.ReadReply(c)
			if err != nil || rep != tt.rep {
				t.Fatalf("reply = %#x, %v; want %#x", rep, err, tt.rep)
			}
			if rep != socks5.RepSucceeded {
				if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
					t.Errorf("refused connection stays open: %d, %v", n, err)
				}
				return
			}
			if _, err := c.Write([]byte("ping")); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 4)
			if _, err := io.ReadFull(c, got); err != nil || string(got) != "ping" {
				t.Errorf("tunnel echoed %q, %v", got, err)
			}
		})
	}
	// Only checked public addresses were ever dialled.
	for _, a := range d.Dialed() {
		if !strings.HasPrefix(a, "93.184.215.14:") {
			t.Errorf("dialled %s", a)
		}
	}

	// One log line per decision, naming the host and the reason.
	deadline := time.Now().Add(5 * time.Second)
	var decisions []map[string]any
	for time.Now().Before(deadline) {
		decisions = decisions[:0]
		for _, l := range logs.lines(t) {
			if l["msg"] == "egress allowed" || l["msg"] == "egress refused" {
				decisions = append(decisions, l)
			}
		}
		if len(decisions) >= len(tests) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(decisions) != len(tests) {
		t.Fatalf("%d decision lines for %d requests: %v", len(decisions), len(tests), decisions)
	}
	var sawNAT64 bool
	for _, l := range decisions {
		if l["msg"] == "egress refused" && l["reason"] == nil {
			t.Errorf("refusal without a reason: %v", l)
		}
		if l["host"] == "nat64.example" && strings.Contains(l["reason"].(string), "NAT64") {
			sawNAT64 = true
		}
	}
	if !sawNAT64 {
		t.Error("no refusal line names NAT64 for nat64.example")
	}
}

func TestGreetingRefusals(t *testing.T) {
	sock, _ := startProxy(t, []string{"granted.example"}, nettest.Resolver{}, &nettest.Dialer{})
	for _, tt := range []struct {
		name string
		send []byte
		want []byte
	}{
		{"no acceptable method", []byte{5, 1, 2}, []byte{5, 0xff}},
		{"SOCKS4", []byte{4, 1, 0, 80, 1, 2, 3, 4, 0}, nil},
		{"unknown address type", []byte{5, 1, 0, 5, 1, 0, 9, 0, 0}, []byte{5, 0, 5, socks5.RepAtypNotSupported, 0, 1, 0, 0, 0, 0, 0, 0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write(tt.send); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(c)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tt.want) {
				t.Errorf("proxy answered %x, want %x and a close", got, tt.want)
			}
		})
	}
}

// BenchmarkConnect measures one proxied connection: dial the Unix socket,
// SOCKS5 handshake, policy check, connect, one echoed byte, close.
func BenchmarkConnect(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	name, _ := hostrule.ParseName("granted.example")
	sock := filepath.Join(b.TempDir(), "egress.sock")
	pl, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	p := &Proxy{Hosts: []hostrule.Name{name}, Resolver: nettest.Resolver{"granted.example": nettest.Addrs("93.184.215.14")},
		Dialer: &nettest.Dialer{To: map[string]string{"93.184.215.14:443": ln.Addr().String()}}, Log: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = p.Serve(ctx, pl) }()
	buf := make([]byte, 1)
	for b.Loop() {
		c, err := socks5.Dial(ctx, sock, "granted.example", 443)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Write([]byte{1}); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

// TestStopEndsTunnels: cancelling the proxy ends an open tunnel at once.
func TestStopEndsTunnels(t *testing.T) {
	echo := echoServer(t)
	name, _ := hostrule.ParseName("granted.example")
	sock := filepath.Join(t.TempDir(), "egress.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Hosts: []hostrule.Name{name}, Resolver: nettest.Resolver{"granted.example": nettest.Addrs("93.184.215.14")},
		Dialer: &nettest.Dialer{To: map[string]string{"93.184.215.14:443": echo}}, Log: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()
	c, err := socks5.Dial(context.Background(), sock, "granted.example", 443)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve waited for an open tunnel")
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("tunnel still open after stop: %d, %v", n, err)
	}
}
