// Package contain is the containment table's test: a probe, run under a
// role's uid, gid and namespaces, tries every cell of package layout's
// [layout.Row] against a state directory made by [layout.Make], with a
// real listener (package sockets, the table's accepted uids) under each
// listener role's uid, and the result must equal the row cell for cell.
//
// Invariant: the probe only connects, opens and stats; it never writes a
// byte into the state directory except a file it creates and removes in
// a directory the table lets it create in, and it dials only addresses
// of this machine.
package contain

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// Job is what a probe is asked to try.
type Job struct {
	State    string        // the state directory
	Cells    []layout.Cell // every cell; Reach is ignored
	Loopback string        // a TCP listener on the host's loopback
	Host     string        // a TCP listener on a non-loopback address of the host
}

// Try does each cell's operation and reports whether it succeeded.
func Try(j Job) []bool {
	got := make([]bool, len(j.Cells))
	for i, c := range j.Cells {
		got[i] = try(j, c)
	}
	return got
}

func try(j Job, c layout.Cell) bool {
	p := filepath.Join(j.State, filepath.FromSlash(c.Path))
	switch c.Op {
	case layout.OpEnter:
		_, err := os.Stat(p + "/.") // not Join, which would clean the "." away
		return err == nil
	case layout.OpList:
		f, err := os.Open(p)
		if err != nil {
			return false
		}
		defer f.Close()
		_, err = f.Readdirnames(1)
		return err == nil || errors.Is(err, io.EOF)
	case layout.OpCreate:
		f, err := os.CreateTemp(p, ".probe-")
		if err != nil {
			return false
		}
		f.Close()
		os.Remove(f.Name())
		return true
	case layout.OpRead, layout.OpWrite:
		flag := os.O_RDONLY
		if c.Op == layout.OpWrite {
			flag = os.O_WRONLY
		}
		f, err := os.OpenFile(p, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != nil {
			return false
		}
		f.Close()
		return true
	case layout.OpConnect:
		conn, err := net.DialTimeout("unix", p, time.Second)
		if err != nil {
			return false
		}
		defer conn.Close()
		// A listener that refused the peer closes at once; one that
		// kept it waits for a request.
		conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, err = conn.Read(make([]byte, 1))
		var ne net.Error
		return errors.As(err, &ne) && ne.Timeout()
	case layout.OpNetLo, layout.OpNetHost:
		addr := j.Loopback
		if c.Op == layout.OpNetHost {
			addr = j.Host
		}
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		conn.Close()
		return true
	}
	return false
}

// Main runs a probe: the Job as JSON on stdin, the results as JSON on
// stdout.
func Main() int {
	var j Job
	if err := json.NewDecoder(os.Stdin).Decode(&j); err != nil {
		os.Stderr.WriteString("probe: " + err.Error() + "\n")
		return 2
	}
	if err := json.NewEncoder(os.Stdout).Encode(Try(j)); err != nil {
		return 2
	}
	return 0
}
