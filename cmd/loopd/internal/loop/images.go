package loop

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"wntrmute.dev/boxmaker/cmd/loopd/internal/turn"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// MaxImageBytes caps an image loopd reads: gatewayd keeps no file larger.
const MaxImageBytes = 10 << 20

// imageMagic is how each image type gatewayd keeps starts.
var imageMagic = map[string][]byte{
	"image/png":  []byte("\x89PNG\r\n\x1a\n"),
	"image/jpeg": []byte("\xff\xd8\xff"),
	"image/gif":  []byte("GIF8"),
	"image/webp": []byte("RIFF"),
}

// loadImage reads posted images from the state directory's images/
// (layout.Images, which gatewayd writes): images/<session>/<id>, opened
// without following a link, a regular file within MaxImageBytes whose
// first bytes are of its type, as a data URL.
func loadImage(state string) turn.Media {
	root := layout.Images.In(state)
	return func(session, id, typ string) (string, error) {
		magic, ok := imageMagic[typ]
		switch {
		case wire.CheckSessionID(session) != nil || !wire.FileIDPattern.MatchString(id):
			return "", errors.New("load image: bad session or file id")
		case !ok:
			return "", fmt.Errorf("load image: %q is not an image type Boxmaker keeps", typ)
		}
		p := filepath.Join(root, session, id)
		fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
		if err != nil {
			return "", fmt.Errorf("load image %s: %w", id, err)
		}
		f := os.NewFile(uintptr(fd), p)
		defer f.Close()
		fi, err := f.Stat()
		if err != nil || !fi.Mode().IsRegular() || fi.Size() > MaxImageBytes {
			return "", fmt.Errorf("load image %s: not a regular file within %d bytes", id, MaxImageBytes)
		}
		b, err := io.ReadAll(io.LimitReader(f, MaxImageBytes+1))
		if err != nil || len(b) > MaxImageBytes || !bytes.HasPrefix(b, magic) {
			return "", fmt.Errorf("load image %s: unreadable, too large, or not a %s", id, typ)
		}
		return "data:" + typ + ";base64," + base64.StdEncoding.EncodeToString(b), nil
	}
}
