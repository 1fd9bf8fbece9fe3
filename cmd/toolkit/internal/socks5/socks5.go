// Package socks5 is the subset of SOCKS version 5 (RFC 1928) that the
// egress proxy speaks and http_fetch's dialer uses: no authentication
// (method 0x00), the CONNECT command, and destinations named by domain
// name (ATYP 0x03).
//
// Invariants: the parsers read a bounded number of bytes (a greeting at
// most 257, a request at most 262) and never allocate from a length the
// peer sent beyond one byte's worth; [ReadRequest] returns the request
// it read even when the proxy must refuse it (an IP literal, another
// command), so the caller can answer with the right reply code.
//
// The flow on one connection (RFC 1928 sections 3 to 6):
//
//	client: 05 NMETHODS METHODS...          proxy: 05 00 (or 05 FF, close)
//	client: 05 CMD 00 ATYP DST.ADDR DST.PORT proxy: 05 REP 00 01 0.0.0.0 0
//	then, if REP is 00, the connection carries the tunnelled bytes.
package socks5

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Version is the protocol version byte.
const Version = 0x05

// Methods (RFC 1928 section 3).
const (
	MethodNoAuth       = 0x00
	MethodNoAcceptable = 0xff
)

// Commands (section 4).
const (
	CmdConnect   = 0x01
	CmdBind      = 0x02
	CmdAssociate = 0x03
)

// Address types (section 4).
const (
	AtypIPv4   = 0x01
	AtypDomain = 0x03
	AtypIPv6   = 0x04
)

// Reply codes (section 6).
const (
	RepSucceeded          = 0x00
	RepGeneralFailure     = 0x01
	RepNotAllowed         = 0x02 // connection not allowed by ruleset
	RepNetworkUnreachable = 0x03
	RepHostUnreachable    = 0x04
	RepConnectionRefused  = 0x05
	RepTTLExpired         = 0x06
	RepCmdNotSupported    = 0x07
	RepAtypNotSupported   = 0x08
)

// ErrProtocol is wrapped by every error about malformed bytes.
var ErrProtocol = errors.New("socks5: protocol error")

// ReadGreeting reads the client's method selection message and reports
// whether it offers "no authentication".
func ReadGreeting(r io.Reader) (noAuth bool, err error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return false, fmt.Errorf("%w: greeting: %v", ErrProtocol, err)
	}
	if h[0] != Version {
		return false, fmt.Errorf("%w: greeting: version %d", ErrProtocol, h[0])
	}
	if h[1] == 0 {
		return false, fmt.Errorf("%w: greeting: no methods", ErrProtocol)
	}
	var m [255]byte
	if _, err := io.ReadFull(r, m[:h[1]]); err != nil {
		return false, fmt.Errorf("%w: greeting: %v", ErrProtocol, err)
	}
	for _, x := range m[:h[1]] {
		if x == MethodNoAuth {
			return true, nil
		}
	}
	return false, nil
}

// Request is a client's request. Host holds the domain name as sent for
// ATYP 0x03, and is empty for IP literals, whose bytes are in Addr.
type Request struct {
	Cmd  byte
	Atyp byte
	Host string
	Addr []byte // 4 or 16 bytes for AtypIPv4 or AtypIPv6
	Port uint16
}

// ReadRequest reads one request. A request with an unknown address type
// is an error (its length is unknown); one with another command or an IP
// literal is returned whole for the caller to refuse.
func ReadRequest(r io.Reader) (Request, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Request{}, fmt.Errorf("%w: request: %v", ErrProtocol, err)
	}
	if h[0] != Version {
		return Request{}, fmt.Errorf("%w: request: version %d", ErrProtocol, h[0])
	}
	if h[2] != 0 {
		return Request{}, fmt.Errorf("%w: request: reserved byte is %d", ErrProtocol, h[2])
	}
	req := Request{Cmd: h[1], Atyp: h[3]}
	var buf [255]byte
	switch req.Atyp {
	case AtypIPv4, AtypIPv6:
		n := 4
		if req.Atyp == AtypIPv6 {
			n = 16
		}
		if _, err := io.ReadFull(r, buf[:n]); err != nil {
			return Request{}, fmt.Errorf("%w: request: %v", ErrProtocol, err)
		}
		req.Addr = append([]byte(nil), buf[:n]...)
	case AtypDomain:
		var l [1]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return Request{}, fmt.Errorf("%w: request: %v", ErrProtocol, err)
		}
		if l[0] == 0 {
			return Request{}, fmt.Errorf("%w: request: empty domain name", ErrProtocol)
		}
		if _, err := io.ReadFull(r, buf[:l[0]]); err != nil {
			return Request{}, fmt.Errorf("%w: request: %v", ErrProtocol, err)
		}
		req.Host = string(buf[:l[0]])
	default:
		return Request{}, fmt.Errorf("%w: request: address type %d", ErrProtocol, req.Atyp)
	}
	var p [2]byte
	if _, err := io.ReadFull(r, p[:]); err != nil {
		return Request{}, fmt.Errorf("%w: request: %v", ErrProtocol, err)
	}
	req.Port = binary.BigEndian.Uint16(p[:])
	return req, nil
}

// AppendRequest appends the wire form of a CONNECT-style request to b.
// Host must be 1 to 255 bytes for AtypDomain.
func AppendRequest(b []byte, req Request) ([]byte, error) {
	b = append(b, Version, req.Cmd, 0, req.Atyp)
	switch req.Atyp {
	case AtypDomain:
		if len(req.Host) == 0 || len(req.Host) > 255 {
			return nil, fmt.Errorf("socks5: domain name of %d bytes", len(req.Host))
		}
		b = append(b, byte(len(req.Host)))
		b = append(b, req.Host...)
	case AtypIPv4, AtypIPv6:
		if want := map[byte]int{AtypIPv4: 4, AtypIPv6: 16}[req.Atyp]; len(req.Addr) != want {
			return nil, fmt.Errorf("socks5: address of %d bytes", len(req.Addr))
		}
		b = append(b, req.Addr...)
	default:
		return nil, fmt.Errorf("socks5: address type %d", req.Atyp)
	}
	return binary.BigEndian.AppendUint16(b, req.Port), nil
}

// Reply is the proxy's reply with code rep. The bound address is always
// 0.0.0.0:0: the client has no use for the proxy's own address.
func Reply(rep byte) []byte {
	return []byte{Version, rep, 0, AtypIPv4, 0, 0, 0, 0, 0, 0}
}

// ReadReply reads a reply and returns its code. It reads the bound
// address of any type so that the tunnel starts at the right byte.
func ReadReply(r io.Reader) (byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, fmt.Errorf("%w: reply: %v", ErrProtocol, err)
	}
	if h[0] != Version || h[2] != 0 {
		return 0, fmt.Errorf("%w: reply: bad header", ErrProtocol)
	}
	var n int
	switch h[3] {
	case AtypIPv4:
		n = 4
	case AtypIPv6:
		n = 16
	case AtypDomain:
		var l [1]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return 0, fmt.Errorf("%w: reply: %v", ErrProtocol, err)
		}
		n = int(l[0])
	default:
		return 0, fmt.Errorf("%w: reply: address type %d", ErrProtocol, h[3])
	}
	var buf [255 + 2]byte
	if _, err := io.ReadFull(r, buf[:n+2]); err != nil {
		return 0, fmt.Errorf("%w: reply: %v", ErrProtocol, err)
	}
	return h[1], nil
}

// ReplyText describes a reply code for a tool's error message.
func ReplyText(rep byte) string {
	switch rep {
	case RepSucceeded:
		return "succeeded"
	case RepGeneralFailure:
		return "general failure"
	case RepNotAllowed:
		return "not allowed by the call's grant or the egress address policy"
	case RepNetworkUnreachable:
		return "network unreachable"
	case RepHostUnreachable:
		return "host unreachable or name not resolved"
	case RepConnectionRefused:
		return "connection refused"
	case RepTTLExpired:
		return "timed out"
	case RepCmdNotSupported:
		return "command not supported"
	case RepAtypNotSupported:
		return "address type not supported"
	}
	return fmt.Sprintf("reply code %d", rep)
}
