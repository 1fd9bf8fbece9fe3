package socks5

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"testing"
)

func TestReadRequest(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want Request
		err  bool
	}{
		{"domain", []byte{5, 1, 0, 3, 9, 'a', '.', 'e', 'x', 'a', 'm', 'p', 'l', 'e', 1, 187}, Request{Cmd: 1, Atyp: 3, Host: "a.example", Port: 443}, false},
		{"ipv4", []byte{5, 1, 0, 1, 10, 0, 0, 1, 0, 80}, Request{Cmd: 1, Atyp: 1, Addr: []byte{10, 0, 0, 1}, Port: 80}, false},
		{"ipv6", append(append([]byte{5, 1, 0, 4}, make([]byte, 16)...), 0, 80), Request{Cmd: 1, Atyp: 4, Addr: make([]byte, 16), Port: 80}, false},
		{"bind is returned", []byte{5, 2, 0, 3, 1, 'x', 0, 80}, Request{Cmd: 2, Atyp: 3, Host: "x", Port: 80}, false},
		{"version 4", []byte{4, 1, 0, 3, 1, 'x', 0, 80}, Request{}, true},
		{"reserved set", []byte{5, 1, 1, 3, 1, 'x', 0, 80}, Request{}, true},
		{"empty name", []byte{5, 1, 0, 3, 0, 0, 80}, Request{}, true},
		{"short name", []byte{5, 1, 0, 3, 5, 'x'}, Request{}, true},
		{"no port", []byte{5, 1, 0, 3, 1, 'x', 0}, Request{}, true},
		{"unknown atyp", []byte{5, 1, 0, 2, 0, 0}, Request{}, true},
		{"empty", nil, Request{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadRequest(bytes.NewReader(tt.in))
			if (err != nil) != tt.err {
				t.Fatalf("ReadRequest = %v, want error %v", err, tt.err)
			}
			if err != nil && !errors.Is(err, ErrProtocol) {
				t.Errorf("error %v does not wrap ErrProtocol", err)
			}
			if got.Cmd != tt.want.Cmd || got.Atyp != tt.want.Atyp || got.Host != tt.want.Host || got.Port != tt.want.Port || !bytes.Equal(got.Addr, tt.want.Addr) {
				t.Errorf("ReadRequest = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestReadGreeting(t *testing.T) {
	for _, tt := range []struct {
		in     []byte
		noAuth bool
		err    bool
	}{
		{[]byte{5, 1, 0}, true, false},
		{[]byte{5, 3, 2, 1, 0}, true, false},
		{[]byte{5, 1, 2}, false, false},
		{[]byte{5, 0}, false, true},
		{[]byte{4, 1, 0}, false, true},
		{[]byte{5, 2, 0}, false, true},
	} {
		got, err := ReadGreeting(bytes.NewReader(tt.in))
		if got != tt.noAuth || (err != nil) != tt.err {
			t.Errorf("ReadGreeting(%x) = %v, %v", tt.in, got, err)
		}
	}
}

// FuzzReadRequest: the parser never reads past one request, and every
// request it accepts re-encodes to exactly the bytes it read.
func FuzzReadRequest(f *testing.F) {
	f.Add([]byte{5, 1, 0, 3, 9, 'a', '.', 'e', 'x', 'a', 'm', 'p', 'l', 'e', 1, 187})
	f.Add([]byte{5, 1, 0, 1, 10, 0, 0, 1, 0, 80})
	f.Add(append(append([]byte{5, 1, 0, 4}, make([]byte, 16)...), 0, 80))
	f.Add([]byte{5, 1, 0, 3, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		req, err := ReadRequest(r)
		if err != nil {
			return
		}
		n := len(data) - r.Len()
		if n > 262 {
			t.Fatalf("read %d bytes for one request", n)
		}
		out, err := AppendRequest(nil, req)
		if err != nil {
			t.Fatalf("AppendRequest(%+v) = %v", req, err)
		}
		if !bytes.Equal(out, data[:n]) {
			t.Fatalf("re-encoded %x, read %x", out, data[:n])
		}
	})
}

// FuzzReadGreeting: the greeting parser reads at most 257 bytes and
// never panics.
func FuzzReadGreeting(f *testing.F) {
	f.Add([]byte{5, 1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		_, _ = ReadGreeting(r)
		if len(data)-r.Len() > 257 {
			t.Fatalf("read %d bytes", len(data)-r.Len())
		}
	})
}

// TestDialRefused: the client turns a non-zero reply into a
// RefusedError and sends the host as a domain name even when it is an
// IP literal.
func TestDialRefused(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan Request, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if ok, err := ReadGreeting(c); !ok || err != nil {
			return
		}
		_, _ = c.Write([]byte{5, 0})
		req, _ := ReadRequest(c)
		got <- req
		_, _ = c.Write(Reply(RepNotAllowed))
	}()
	_, err = Dial(context.Background(), sock, "10.0.0.1", 443)
	var re *RefusedError
	if !errors.As(err, &re) || re.Rep != RepNotAllowed {
		t.Fatalf("Dial = %v, want a RefusedError with 0x02", err)
	}
	if req := <-got; req.Atyp != AtypDomain || req.Host != "10.0.0.1" || req.Port != 443 || req.Cmd != CmdConnect {
		t.Errorf("client sent %+v", req)
	}
	if _, err := ReadReply(bytes.NewReader(Reply(RepSucceeded))); err != nil {
		t.Error(err)
	}
	if _, err := ReadReply(io.LimitReader(bytes.NewReader(Reply(0)), 5)); err == nil {
		t.Error("ReadReply of a short reply succeeded")
	}
}
