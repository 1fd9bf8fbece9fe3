package audit

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// AnchorGauge is the metric `bxctl audit anchor` writes into the state's
// metrics/ directory (layout.AnchorTimeFile): when the owner last
// anchored the audit log. The anchors themselves stay in the owner's
// file, out of every role's reach; this one figure is what !status and
// a dashboard show of them. A role may read it and none may write it.
const AnchorGauge = "boxmaker_audit_anchor_timestamp_seconds"

// WriteAnchorTime writes the textfile at path (Prometheus text format,
// node_exporter's textfile collector): the gauge with t, atomically,
// mode 0644 (a time, no content).
func WriteAnchorTime(path string, t time.Time) error {
	text := fmt.Sprintf("# HELP %s When the owner last anchored the audit log (bxctl audit anchor), in seconds since the epoch.\n# TYPE %s gauge\n%s %d\n",
		AnchorGauge, AnchorGauge, AnchorGauge, t.Unix())
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, err = tmp.WriteString(text)
	err = errors.Join(err, tmp.Chmod(0o644), tmp.Sync(), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// maxAnchorTime caps what ReadAnchorTime reads.
const maxAnchorTime = 4 << 10

// ReadAnchorTime reads the time WriteAnchorTime wrote at path: the zero
// time when there is no file. It reads a regular file only, never
// through a link, and at most 4 KiB.
func ReadAnchorTime(path string) (time.Time, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return time.Time{}, fmt.Errorf("%s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxAnchorTime))
	if err != nil {
		return time.Time{}, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, AnchorGauge+" "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil || n <= 0 {
				return time.Time{}, fmt.Errorf("%s: %s is not a time", path, AnchorGauge)
			}
			return time.Unix(n, 0).UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%s holds no %s", path, AnchorGauge)
}
