// Package egress is the per-call SOCKS5 proxy through which a tool
// container, which has no network of its own, reaches the hosts its
// grant names.
//
// Invariants, for every connection:
//   - only "no authentication", CONNECT and a domain name are accepted;
//     an IP literal gets reply 0x02 (not allowed by ruleset), another
//     command 0x07;
//   - the name must parse as a [hostrule.Name] (ASCII case folded) and be
//     one of the granted names exactly ([hostrule.Allowed]), and the port
//     must be 80 or 443 (tool URLs carry no port);
//   - the proxy resolves the name itself, and refuses unless every
//     address it resolves to passes [netpolicy.Check] (an IPv4-mapped
//     answer is checked as the IPv4 address it maps); it then connects
//     to one of those checked addresses, never looking the name up again;
//   - every decision is one JSON line on the log (stderr), with the name,
//     port, outcome and reason, and never any tunnelled byte.
//
// Each connection is one CONNECT; a redirect to another name is a new
// connection and is checked afresh.
package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"wntrmute.dev/boxmaker/cmd/toolkit/internal/socks5"
	"wntrmute.dev/boxmaker/pkg/tool/hostrule"
	"wntrmute.dev/boxmaker/pkg/tool/netpolicy"
)

// Resolver looks names up; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer connects to a checked address; *net.Dialer is one.
type Dialer interface {
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// Limits of one proxy.
const (
	MaxConns         = 32               // connections served at once
	HandshakeTimeout = 10 * time.Second // greeting and request
	LookupTimeout    = 10 * time.Second
	ConnectTimeout   = 15 * time.Second
)

// Ports are the destination ports a tool may reach: its URL has no port,
// so http_fetch only ever asks for these.
var Ports = []uint16{80, 443}

// Proxy is one call's egress proxy.
type Proxy struct {
	Hosts    []hostrule.Name // the grant's hosts
	Resolver Resolver
	Dialer   Dialer
	Log      *slog.Logger
}

// Serve accepts connections on ln until ctx ends, then closes ln, ends
// the open tunnels and waits for their goroutines.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	sem := make(chan struct{}, MaxConns)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		c, err := ln.Accept()
		if err != nil {
			<-sem
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("egress: accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			p.serveConn(ctx, c)
		}()
	}
}

// decision is what the proxy decided for one request.
type decision struct {
	rep    byte
	reason string
	conn   net.Conn
	addr   netip.Addr
}

func (p *Proxy) serveConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	// A stopped proxy ends its open tunnels rather than wait for them.
	defer context.AfterFunc(ctx, func() { c.Close() })()
	_ = c.SetDeadline(time.Now().Add(HandshakeTimeout))
	noAuth, err := socks5.ReadGreeting(c)
	if err != nil {
		drain(c)
		p.Log.Info("egress refused", "reason", "malformed greeting")
		return
	}
	if !noAuth {
		_, _ = c.Write([]byte{socks5.Version, socks5.MethodNoAcceptable})
		p.Log.Info("egress refused", "reason", "client offers no acceptable method")
		return
	}
	if _, err := c.Write([]byte{socks5.Version, socks5.MethodNoAuth}); err != nil {
		return
	}
	req, err := socks5.ReadRequest(c)
	if err != nil {
		// An unknown address type: RFC 1928 asks for 0x08.
		_, _ = c.Write(socks5.Reply(socks5.RepAtypNotSupported))
		drain(c)
		p.Log.Info("egress refused", "reason", "malformed request")
		return
	}
	d := p.decide(ctx, req)
	if d.rep != socks5.RepSucceeded {
		_, _ = c.Write(socks5.Reply(d.rep))
		p.Log.Info("egress refused", "host", hostAttr(req), "port", req.Port, "reply", d.rep, "reason", d.reason)
		return
	}
	defer d.conn.Close()
	defer context.AfterFunc(ctx, func() { d.conn.Close() })()
	if _, err := c.Write(socks5.Reply(socks5.RepSucceeded)); err != nil {
		return
	}
	p.Log.Info("egress allowed", "host", req.Host, "port", req.Port, "addr", d.addr.String())
	_ = c.SetDeadline(time.Time{})
	sent, received := splice(c, d.conn)
	p.Log.Info("egress closed", "host", req.Host, "port", req.Port, "sent", sent, "received", received)
}

// hostAttr is what the log says of a request's destination: the name as
// sent (quoted by the JSON handler), or the literal address.
func hostAttr(req socks5.Request) string {
	if req.Atyp == socks5.AtypDomain {
		return req.Host
	}
	if a, ok := netip.AddrFromSlice(req.Addr); ok {
		return a.String()
	}
	return ""
}

func (p *Proxy) decide(ctx context.Context, req socks5.Request) decision {
	if req.Cmd != socks5.CmdConnect {
		return decision{rep: socks5.RepCmdNotSupported, reason: "only CONNECT is supported"}
	}
	if req.Atyp != socks5.AtypDomain {
		return decision{rep: socks5.RepNotAllowed, reason: "an IP literal; only granted host names may be reached"}
	}
	name, err := hostrule.ParseHost(req.Host)
	if err != nil {
		return decision{rep: socks5.RepNotAllowed, reason: "not a valid host name"}
	}
	if !hostrule.Allowed(name, p.Hosts) {
		return decision{rep: socks5.RepNotAllowed, reason: "host not granted to this call"}
	}
	portOK := false
	for _, x := range Ports {
		portOK = portOK || x == req.Port
	}
	if !portOK {
		return decision{rep: socks5.RepNotAllowed, reason: "port not 80 or 443"}
	}
	lctx, cancel := context.WithTimeout(ctx, LookupTimeout)
	addrs, err := p.Resolver.LookupNetIP(lctx, "ip", name.String())
	cancel()
	if err != nil || len(addrs) == 0 {
		return decision{rep: socks5.RepHostUnreachable, reason: "name did not resolve"}
	}
	for i, a := range addrs {
		// Go's resolver returns every IPv4 address it reads from
		// /etc/hosts (and an AAAA record holding a mapped address) in
		// the IPv4-mapped form; it is checked, and dialled, as the IPv4
		// address it is, so ::ffff:10.0.0.1 is refused as 10.0.0.1.
		a = a.Unmap()
		addrs[i] = a
		if err := netpolicy.Check(a); err != nil {
			return decision{rep: socks5.RepNotAllowed, reason: "resolves to a non-public address: " + err.Error()}
		}
	}
	var last error
	for _, a := range addrs {
		dctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
		conn, err := p.Dialer.DialContext(dctx, "tcp", netip.AddrPortFrom(a, req.Port).String())
		cancel()
		if err == nil {
			return decision{rep: socks5.RepSucceeded, conn: conn, addr: a}
		}
		last = err
	}
	rep := byte(socks5.RepHostUnreachable)
	if errors.Is(last, syscall.ECONNREFUSED) {
		rep = socks5.RepConnectionRefused
	}
	return decision{rep: rep, reason: "connect failed"}
}

// drain ends a connection whose peer sent bytes the proxy did not read:
// closing with unread data would reset the connection and could discard
// the reply just written, so it half-closes and reads a little first.
func drain(c net.Conn) {
	closeWrite(c)
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 4096))
}

// splice copies both ways until both directions end, half-closing each
// side as its source ends, and returns the bytes sent to and received
// from the destination.
func splice(client, dest net.Conn) (sent, received int64) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sent, _ = io.Copy(dest, client)
		closeWrite(dest)
	}()
	received, _ = io.Copy(client, dest)
	closeWrite(client)
	wg.Wait()
	return sent, received
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}
