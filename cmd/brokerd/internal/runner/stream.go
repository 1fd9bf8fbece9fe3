package runner

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/containers/podman/v5/version"
)

// The runner's own attach: one upgrade request on a socket of its own,
// where the bindings' containers.Attach first inspects the container (to
// learn whether it has a terminal, which a tool container never has) and
// then replaces the shared connection's transport with one that keeps
// the first socket it dials (containers/podman v5.8.2,
// pkg/bindings/containers/attach.go lines 70 and 560-611), so two calls
// could never share a connection. The wire, from the same tag:
//
//   - the request: POST /v{version}/libpod/containers/{id}/attach with the
//     query's stream, stdin, stdout and stderr, and the headers
//     "Connection: Upgrade" and "Upgrade: tcp"
//     (pkg/api/server/register_containers.go lines 1357-1498); an
//     explicit stdin=false matters, since the handler attaches every
//     stream it is not told about once one is named
//     (pkg/api/handlers/compat/containers_attach.go lines 42-61), and an
//     empty detachKeys turns the detach sequence off (lines 37-40, and
//     libpod/oci_conmon_attach_common.go lines 199-203), so no input can
//     end the stream early;
//   - the handler prepares a configured container (conmon and the
//     runtime's create: its process, namespaces and mounts, waiting to
//     run the tool's program), connects to conmon's attach socket, and
//     only then answers "101 UPGRADED" with the Content-Type
//     application/vnd.docker.multiplexed-stream for a container without a
//     terminal (libpod/container_api.go lines 418-437,
//     libpod/oci_conmon_common.go lines 487-536, libpod/util.go lines
//     171-202): the answer is the signal that the container can start
//     with nothing of its output lost;
//   - then each read from conmon is one frame: an 8-byte header (the
//     stream, 1 stdout or 2 stderr, 0 for stdin "written on stdout";
//     three zero bytes; the payload's length, big-endian uint32) and the
//     payload (libpod/oci_conmon_common.go lines 1552-1625, libpod/util.go
//     lines 162-167); Podman's own error at the end is a stderr frame
//     (libpod/util.go lines 129-145);
//   - the stream ends when conmon closes its attach socket (the
//     container's output has ended): the output copy returns and the
//     handler closes the socket (libpod/oci_conmon_common.go lines
//     543-545, 636-655 and 665-672); closing the socket's write side
//     ends the container's stdin (lines 656-663 and 673-680).

// multiplexed is the Content-Type of a stream without a terminal, which
// demux reads; a raw (terminal) stream would be parsed as garbage.
const multiplexed = "application/vnd.docker.multiplexed-stream"

// apiVersion is the version the bindings put in every request's path
// (pkg/bindings/connection.go line 439).
var apiVersion = func() string {
	v := version.APIVersion[version.Libpod][version.CurrentAPI]
	return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
}()

// stream is an upgraded attach connection: demux reads its output, and
// the tool's input is written to it.
type stream struct {
	conn *net.UnixConn
	// r holds what the HTTP answer's reader read past the headers.
	r *bufio.Reader
}

// attach opens id's attach stream on a socket of its own. ctx bounds the
// request and its answer, not the stream.
func (p *Podman) attach(ctx context.Context, id string, stdin bool) (*stream, error) {
	path := strings.TrimPrefix(p.url, "unix://")
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	conn := c.(*net.UnixConn)
	// A cancelled call interrupts the request and the wait for its answer.
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	s, err := upgrade(conn, id, stdin)
	if cancelled := !stop(); err != nil || cancelled {
		conn.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("the call was cancelled: %v", ctx.Err())
		}
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	return s, nil
}

// upgrade sends the attach request on conn and reads the answer.
func upgrade(conn *net.UnixConn, id string, stdin bool) (*stream, error) {
	q := url.Values{
		"stream": {"true"}, "stdout": {"true"}, "stderr": {"true"},
		"stdin": {strconv.FormatBool(stdin)}, "detachKeys": {""},
	}
	req, err := http.NewRequest(http.MethodPost, "http://d/v"+apiVersion+"/libpod/containers/"+url.PathEscape(id)+"/attach?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "tcp")
	if err := req.Write(conn); err != nil {
		return nil, err
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		return nil, fmt.Errorf("%s: %s", resp.Status, podmanMessage(resp.Body))
	}
	// A 1xx answer has no body: r is at the stream's first byte.
	if ct := resp.Header.Get("Content-Type"); ct != multiplexed {
		return nil, fmt.Errorf("the stream's Content-Type is %q, not %q: a container with a terminal, or a Podman whose stream the runner cannot read", ct, multiplexed)
	}
	return &stream{conn: conn, r: r}, nil
}

// podmanMessage is the message of Podman's JSON error body (its
// errorhandling.ErrorModel), at most 1 KiB of it.
func podmanMessage(body io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(body, 4096))
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &e) == nil && e.Message != "" {
		b = []byte(e.Message)
	}
	return strings.ToValidUTF8(string(b[:min(len(b), 1024)]), "?")
}

// feed writes the tool's input and then closes the stream's write side:
// the container reads end of file. An error (the container gone, the
// stream closed) leaves the rest unwritten.
func (s *stream) feed(in []byte) {
	if _, err := s.conn.Write(in); err == nil {
		s.conn.CloseWrite()
	}
}

// Close ends the stream both ways; demux then returns.
func (s *stream) Close() error { return s.conn.Close() }

// errLostSync is a stream that does not follow the frame format: what
// came after it cannot be told apart from output.
var errLostSync = errors.New("the attach stream lost its frame format")

// demux copies a multiplexed stream's payloads to stdout and stderr until
// it ends. It never allocates by a header's length: a payload is copied
// through one buffer. It returns nil only for a stream that ended at a
// frame's boundary.
func demux(r io.Reader, stdout, stderr io.Writer) error {
	var h [8]byte
	buf := make([]byte, 32<<10)
	for {
		switch _, err := io.ReadFull(r, h[:]); err {
		case nil:
		case io.EOF:
			return nil
		case io.ErrUnexpectedEOF:
			return fmt.Errorf("%w: a frame header cut short", errLostSync)
		default:
			return err
		}
		var w io.Writer
		switch h[0] {
		case 0, 1:
			w = stdout
		case 2:
			w = stderr
		}
		if w == nil || h[1]|h[2]|h[3] != 0 {
			return fmt.Errorf("%w: header % x", errLostSync, h)
		}
		n := int64(binary.BigEndian.Uint32(h[4:]))
		if got, err := io.CopyBuffer(w, io.LimitReader(r, n), buf); err != nil {
			return err
		} else if got < n {
			return fmt.Errorf("%w: a frame of %d bytes cut short at %d", errLostSync, n, got)
		}
	}
}
