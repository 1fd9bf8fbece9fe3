package egress

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/cmd/toolkit/internal/nettest"
	"wntrmute.dev/boxmaker/pkg/tool/hostrule"
)

// refusingDialer records what it was asked to dial and connects nothing.
type refusingDialer struct{ dialed []string }

func (d *refusingDialer) DialContext(_ context.Context, _, addr string) (net.Conn, error) {
	d.dialed = append(d.dialed, addr)
	return nil, errors.New("no network in this test")
}

// FuzzServeConn feeds arbitrary bytes to one proxy connection: whatever
// a client sends, the proxy dials nothing but a granted name's checked
// public address, on port 80 or 443.
func FuzzServeConn(f *testing.F) {
	f.Add([]byte("\x05\x01\x00\x05\x01\x00\x03\x0fgranted.example\x01\xbb"))
	f.Add([]byte("\x05\x01\x00\x05\x01\x00\x03\x0fprivate.example\x00\x50"))
	f.Add([]byte("\x05\x01\x00\x05\x01\x00\x01\x0a\x00\x00\x01\x00\x50"))
	f.Add([]byte("\x05\x02\x00\x02\x05\x01\x00\x03\x0fGRANTED.EXAMPLE\x00\x50"))
	names := []hostrule.Name{}
	for _, h := range []string{"granted.example", "private.example"} {
		n, _ := hostrule.ParseName(h)
		names = append(names, n)
	}
	res := nettest.Resolver{"granted.example": nettest.Addrs("93.184.215.14"), "private.example": nettest.Addrs("10.0.0.1"), "ungranted.example": nettest.Addrs("93.184.215.15")}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := &refusingDialer{}
		p := &Proxy{Hosts: names, Resolver: res, Dialer: d, Log: slog.New(slog.NewJSONHandler(io.Discard, nil))}
		client, server := net.Pipe()
		done := make(chan struct{})
		go func() {
			p.serveConn(context.Background(), server)
			close(done)
		}()
		go func() { _, _ = io.Copy(io.Discard, client) }()
		_, _ = client.Write(data)
		client.Close()
		<-done
		for _, a := range d.dialed {
			if a != "93.184.215.14:443" && a != "93.184.215.14:80" {
				t.Fatalf("dialled %s for input %q", a, data)
			}
			if !strings.Contains(strings.ToLower(string(data)), "granted.example") {
				t.Fatalf("dialled %s without the granted name in %q", a, data)
			}
		}
	})
}
