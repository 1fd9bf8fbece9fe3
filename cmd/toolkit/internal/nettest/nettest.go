// Package nettest holds the egress proxy's test doubles for name
// resolution and dialling, shared by the tests of the proxy (egress), of
// http_fetch and consult (tools) and of the MCP client (mcpcall).
//
// Invariant: only tests import it (cmd/toolkit/deps.txt never lists it);
// a Dialer reaches nothing but the listeners its map names.
package nettest

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
)

// Resolver answers from a map; a missing name does not resolve.
type Resolver map[string][]netip.Addr

// LookupNetIP implements the proxy's resolver.
func (r Resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

// Dialer connects a dialled address to a real listener's address, and
// records what was dialled; any other address is unreachable.
type Dialer struct {
	mu     sync.Mutex
	To     map[string]string
	dialed []string
}

// DialContext implements the proxy's dialer.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.dialed = append(d.dialed, addr)
	to, ok := d.To[addr]
	d.mu.Unlock()
	if !ok {
		return nil, errors.New("unreachable in this test")
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, to)
}

// Dialed returns every address dialled so far, in order.
func (d *Dialer) Dialed() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dialed...)
}

// Addrs parses addresses, panicking on a bad one (test data).
func Addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}
