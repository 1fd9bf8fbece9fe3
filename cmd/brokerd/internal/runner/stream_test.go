package runner

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/containers/podman/v5/pkg/bindings/containers"
	"github.com/containers/podman/v5/pkg/specgen"

	"wntrmute.dev/boxmaker/checks/podmantest"
)

// frame is one frame as Podman writes it (containers/podman v5.8.2,
// libpod/util.go lines 162-167, libpod/oci_conmon_common.go lines
// 1585-1604): the stream, three zero bytes, the length, the payload.
func frame(stream byte, payload string) string {
	h := make([]byte, 8, 8+len(payload))
	h[0] = stream
	binary.BigEndian.PutUint32(h[4:], uint32(len(payload)))
	return string(append(h, payload...))
}

// TestDemux: the frames' payloads reach stdout and stderr whole and in
// order; a stream that breaks the format, or ends inside a frame, is an
// error, never output.
func TestDemux(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 5000) // 80 000 bytes
	for _, c := range []struct {
		name, in, stdout, stderr string
		lost                     bool
	}{
		{name: "empty"},
		{name: "both streams", in: frame(1, "out\n") + frame(2, "err\n") + frame(1, "more"), stdout: "out\nmore", stderr: "err\n"},
		{name: "stdin is written on stdout", in: frame(0, "echo") + frame(1, "!"), stdout: "echo!"},
		{name: "empty frame", in: frame(1, "") + frame(2, "e"), stderr: "e"},
		{name: "payload past the copy buffer", in: frame(2, big) + frame(1, "o"), stdout: "o", stderr: big},
		{name: "binary payload that looks like a header", in: frame(1, frame(2, "x")), stdout: frame(2, "x")},
		{name: "header cut short", in: frame(1, "ok") + "\x01\x00\x00", stdout: "ok", lost: true},
		{name: "payload cut short", in: frame(1, "ok") + frame(2, "whole")[:10], stdout: "ok", stderr: "wh", lost: true},
		{name: "stream 3", in: frame(3, "service error"), lost: true},
		{name: "stream 255", in: frame(255, "x"), lost: true},
		{name: "padding not zero", in: "\x01\x00\x01\x00\x00\x00\x00\x01x", lost: true},
		{name: "length past the end", in: "\x01\x00\x00\x00\xff\xff\xff\xffshort", stdout: "short", lost: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, r := range []struct {
				name string
				r    func(string) io.Reader
			}{
				{"whole", func(s string) io.Reader { return strings.NewReader(s) }},
				{"a byte at a time", func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) }},
			} {
				var out, errOut bytes.Buffer
				err := demux(r.r(c.in), &out, &errOut)
				if got := errors.Is(err, errLostSync); got != c.lost || !c.lost && err != nil {
					t.Errorf("%s: demux = %v; want lost sync %v", r.name, err, c.lost)
				}
				if out.String() != c.stdout || errOut.String() != c.stderr {
					t.Errorf("%s: stdout %q, stderr %q; want %q, %q", r.name, out.String(), errOut.String(), c.stdout, c.stderr)
				}
			}
		})
	}
}

// TestDemuxNoAllocByLength: a header claiming 4 GiB costs no more memory
// than one claiming a byte.
func TestDemuxNoAllocByLength(t *testing.T) {
	in := "\x01\x00\x00\x00\xff\xff\xff\xff" + strings.Repeat("x", 100)
	allocs := testing.AllocsPerRun(10, func() {
		demux(strings.NewReader(in), io.Discard, io.Discard)
	})
	var m1, m2 runtime.MemStats
	runtime.ReadMemStats(&m1)
	demux(strings.NewReader(in), io.Discard, io.Discard)
	runtime.ReadMemStats(&m2)
	if allocs > 10 || m2.TotalAlloc-m1.TotalAlloc > 1<<20 {
		t.Errorf("demux of a 4 GiB header: %v allocations, %d bytes", allocs, m2.TotalAlloc-m1.TotalAlloc)
	}
}

// FuzzDemux: whatever the stream holds, demux never fails other than
// with errLostSync or a read error, never writes more than it read, and
// what it accepts is exactly a sequence of whole frames, whose payloads it
// writes unchanged.
func FuzzDemux(f *testing.F) {
	f.Add([]byte(frame(1, "out") + frame(2, "err")))
	f.Add([]byte(frame(0, "") + frame(1, "y")))
	f.Add([]byte("\x02\x00\x00\x00\x00\x00\x00\x05ab"))
	f.Add([]byte("\x01\x00\x00\x00\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out, errOut bytes.Buffer
		err := demux(bytes.NewReader(in), &out, &errOut)
		if err != nil && !errors.Is(err, errLostSync) {
			t.Fatalf("demux = %v: not a lost sync from a reader that cannot fail", err)
		}
		if out.Len()+errOut.Len() > len(in) {
			t.Fatalf("wrote %d bytes from %d", out.Len()+errOut.Len(), len(in))
		}
		// The reference: walk the frames over the slice.
		var wantOut, wantErr []byte
		rest, ok := in, true
		for len(rest) > 0 {
			if len(rest) < 8 || rest[0] > 2 || rest[1]|rest[2]|rest[3] != 0 {
				ok = false
				break
			}
			n := int(binary.BigEndian.Uint32(rest[4:8]))
			if len(rest)-8 < n {
				ok = false
				break
			}
			if rest[0] == 2 {
				wantErr = append(wantErr, rest[8:8+n]...)
			} else {
				wantOut = append(wantOut, rest[8:8+n]...)
			}
			rest = rest[8+n:]
		}
		if ok != (err == nil) {
			t.Fatalf("demux = %v; the frames are whole: %v", err, ok)
		}
		if ok && (!bytes.Equal(out.Bytes(), wantOut) || !bytes.Equal(errOut.Bytes(), wantErr)) {
			t.Fatalf("stdout %q, stderr %q; want %q, %q", out.Bytes(), errOut.Bytes(), wantOut, wantErr)
		}
	})
}

// TestAttachRefusals: the runner's attach against real Podman fails with
// Podman's reason for a container that does not exist, and refuses a
// container with a terminal, whose stream is raw, not frames.
func TestAttachRefusals(t *testing.T) {
	svc := podmantest.Require(t)
	p := newRunner(t, svc, svc.StubImage(t), nil)
	conn, err := p.connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.attach(conn, strings.Repeat("0", 64), true); err == nil || !strings.Contains(err.Error(), "no such container") {
		t.Errorf("attach to a missing container = %v; want Podman's no such container", err)
	}
	s := specgen.NewSpecGenerator(p.cfg.ToolImage, false)
	s.Command = []string{"/bin/sh", "-c", "true"}
	s.Terminal = ptr(true)
	s.Labels = map[string]string{LabelInstance: p.instance}
	s.NetNS = specgen.Namespace{NSMode: specgen.NoNetwork}
	resp, err := containers.CreateWithSpec(conn, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.remove(conn, resp.ID)
	st, err := p.attach(conn, resp.ID, true)
	if err == nil {
		st.Close()
	}
	if err == nil || !strings.Contains(err.Error(), multiplexed) {
		t.Errorf("attach to a container with a terminal = %v; want refused", err)
	}
}
