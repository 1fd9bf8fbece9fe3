package sockets

import (
	"fmt"
	"net"
	"syscall"
)

// peerOf reads the peer's credentials with SO_PEERCRED. The kernel records
// them at connect time, so they cannot be forged by what the peer sends.
func peerOf(c *net.UnixConn) (Peer, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Peer{}, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *syscall.Ucred
	var credErr error
	err = raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	})
	if err == nil {
		err = credErr
	}
	if err != nil {
		return Peer{}, fmt.Errorf("peer credentials: %w", err)
	}
	return Peer{uid: cred.Uid, gid: cred.Gid, pid: cred.Pid}, nil
}
