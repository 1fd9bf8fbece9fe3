//go:build !linux

package sockets

import (
	"errors"
	"net"
)

// peerOf fails closed where SO_PEERCRED does not exist: Boxmaker runs on
// Linux, and a socket whose peer cannot be checked accepts nobody.
func peerOf(*net.UnixConn) (Peer, error) {
	return Peer{}, errors.New("peer credentials: not supported on this system")
}
