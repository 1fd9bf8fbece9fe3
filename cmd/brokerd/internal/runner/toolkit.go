package runner

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/containers/podman/v5/pkg/bindings/containers"
)

// toolkitCopy is the tool image's toolkit, copied out once for MCP
// containers (mcp.go).
type toolkitCopy struct {
	mu   sync.Mutex
	path string // "" until copied
}

// maxToolkit caps the toolkit binary copied out of the tool image.
const maxToolkit = 256 << 20

// errToolkitCopy is the error of a tool image whose toolkit cannot be
// copied out for an MCP container.
var errToolkitCopy = errors.New("the toolkit could not be copied out of the tool image for an MCP server's container; see docs/runbook.md#mcp-toolkit")

// toolkitFile returns the path, in the runner's private work directory,
// of the tool image's /bin/toolkit, copying it out the first time from a
// container of the tool image (by ID) that is created, never started,
// and removed. A link (the Nix-built image links /bin/toolkit into the
// store) is followed inside the image, at most 8 times; what is copied
// must be a regular file, and is written 0555.
func (p *Podman) toolkitFile(conn context.Context) (string, error) {
	p.toolkit.mu.Lock()
	defer p.toolkit.mu.Unlock()
	if p.toolkit.path != "" {
		return p.toolkit.path, nil
	}
	s := p.cfg.hardened(p.instance, "tool", 10)
	s.Command = []string{"/bin/toolkit"}
	id, err := p.create(conn, s)
	if err != nil {
		return "", err
	}
	defer p.remove(conn, id)
	name := "/bin/toolkit"
	for range 8 {
		pr, pw := io.Pipe()
		copyFn, err := containers.CopyToArchive(conn, id, name, pw)
		if err != nil {
			return "", fail(errToolkitCopy, err.Error())
		}
		go func() { pw.CloseWithError(copyFn()) }()
		hdr, body, err := firstEntry(pr)
		if err != nil {
			pr.CloseWithError(err)
			return "", fail(errToolkitCopy, name+": "+err.Error())
		}
		switch hdr.Typeflag {
		case tar.TypeSymlink:
			target := hdr.Linkname
			if !strings.HasPrefix(target, "/") {
				target = path.Join(path.Dir(name), target)
			}
			name = path.Clean(target)
			pr.Close()
			continue
		case tar.TypeReg:
		default:
			pr.Close()
			return "", fail(errToolkitCopy, name+" is not a regular file")
		}
		out := filepath.Join(p.work, "toolkit")
		err = writeExecutable(out, body, hdr.Size)
		pr.Close()
		if err != nil {
			return "", fail(errToolkitCopy, err.Error())
		}
		p.toolkit.path = out
		return out, nil
	}
	return "", fail(errToolkitCopy, "too many links from /bin/toolkit")
}

// firstEntry reads the first entry of a tar stream.
func firstEntry(r io.Reader) (*tar.Header, io.Reader, error) {
	tr := tar.NewReader(r)
	hdr, err := tr.Next()
	if err != nil {
		return nil, nil, err
	}
	if hdr.Size > maxToolkit {
		return nil, nil, fmt.Errorf("over %d bytes", maxToolkit)
	}
	return hdr, tr, nil
}

// writeExecutable writes size bytes of r to path, mode 0555, whole (a
// temporary file beside it, renamed).
func writeExecutable(dst string, r io.Reader, size int64) error {
	f, err := os.CreateTemp(filepath.Dir(dst), ".toolkit-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	n, err := io.Copy(f, io.LimitReader(r, size))
	if err == nil && n != size {
		err = fmt.Errorf("copied %d of %d bytes", n, size)
	}
	if err == nil {
		err = f.Chmod(0o555)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(f.Name(), dst)
}
