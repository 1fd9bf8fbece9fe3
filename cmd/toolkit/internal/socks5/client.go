package socks5

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"
)

// RefusedError is a proxy's non-zero reply to a CONNECT.
type RefusedError struct {
	Host string
	Rep  byte
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("egress proxy refused %s: %s; see docs/runbook.md#egress-refused", e.Host, ReplyText(e.Rep))
}

// Dial connects to host:port through the proxy listening on the Unix
// socket at socket. The host is always sent as a domain name, whatever
// it looks like: the proxy, not the client, decides what may be reached.
func Dial(ctx context.Context, socket, host string, port uint16) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("dial egress proxy: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	} else {
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	}
	if err := handshake(c, host, port); err != nil {
		c.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

func handshake(c net.Conn, host string, port uint16) error {
	msg := []byte{Version, 1, MethodNoAuth}
	msg, err := AppendRequest(msg, Request{Cmd: CmdConnect, Atyp: AtypDomain, Host: host, Port: port})
	if err != nil {
		return err
	}
	// Greeting and request go in one write; the proxy reads them in turn.
	if _, err := c.Write(msg); err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	var sel [2]byte
	if _, err := io.ReadFull(c, sel[:]); err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	if sel[0] != Version || sel[1] != MethodNoAuth {
		return fmt.Errorf("%w: method selection %x", ErrProtocol, sel)
	}
	rep, err := ReadReply(c)
	if err != nil {
		return err
	}
	if rep != RepSucceeded {
		return &RefusedError{Host: host, Rep: rep}
	}
	return nil
}
