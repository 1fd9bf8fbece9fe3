package mcpcall

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"wntrmute.dev/boxmaker/cmd/toolkit/internal/socks5"
)

// bridge is the server's way out when the call's grant names hosts: an
// HTTP CONNECT proxy on the container's own loopback, given to the
// server in HTTPS_PROXY, that turns each CONNECT into a SOCKS5 CONNECT
// through the call's egress proxy (socket), which alone decides what may
// be reached (the granted hosts, public addresses, ports 80 and 443).
// Most servers (Node's with NODE_USE_ENV_PROXY, Python's, Go's) honour
// HTTPS_PROXY; none can speak SOCKS5 over a Unix socket. Only CONNECT is
// served: a plain-HTTP request through it is refused (405), so http://
// URLs have no way out, and TLS stays end to end in the server.
type bridge struct {
	ln     net.Listener
	socket string
}

// connectWait bounds reading a CONNECT request and dialling through the
// egress proxy.
const connectWait = 15 * time.Second

// startBridge listens on 127.0.0.1 and serves until ctx ends.
func startBridge(ctx context.Context, socket string) (*bridge, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &bridge{ln: ln, socket: socket}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go b.serve(ctx, c)
		}
	}()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	return b, nil
}

// URL is the proxy's URL for HTTPS_PROXY.
func (b *bridge) URL() string { return "http://" + b.ln.Addr().String() }

func (b *bridge) serve(ctx context.Context, c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(connectWait))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if req.Method != http.MethodConnect {
		io.WriteString(c, "HTTP/1.1 405 Method Not Allowed\r\nConnection: close\r\n\r\n")
		return
	}
	host, p, err := net.SplitHostPort(req.Host)
	port, perr := strconv.ParseUint(p, 10, 16)
	if err != nil || perr != nil {
		io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")
		return
	}
	dctx, cancel := context.WithTimeout(ctx, connectWait)
	up, err := socks5.Dial(dctx, b.socket, host, uint16(port))
	cancel()
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n")
		return
	}
	defer up.Close()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	c.SetDeadline(time.Time{})
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, br); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// close stops listening; open connections end with the call's context.
func (b *bridge) close() {
	b.ln.Close()
}
