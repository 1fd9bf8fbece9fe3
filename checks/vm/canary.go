package vm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/vm/canary/scan"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

// FindCanary searches the whole guest for token and returns every place
// that holds it: each regular file of every mounted filesystem but the
// kernel's pseudo ones (so the disk, journald's files and every user's
// Podman storage, and also the tmpfs and ramfs mounts: /run, /tmp,
// /dev/shm, systemd's credential directories), and each process's
// /proc/<pid>/environ and cmdline. It fails the test when the scan itself
// fails or cannot read a place, so an empty answer means "nowhere".
//
// The token reaches the guest only on the scanner's stdin, never in an
// argument, the environment or a file. A running unit's own decrypted
// credential sits in /run/credentials/<unit>/ (ramfs, never the disk),
// which a caller expecting it there filters by path.
func FindCanary(t testing.TB, m *Machine, token []byte) []scan.Hit {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	began := time.Now()
	rep, err := Scan(ctx, m, [][]byte{token})
	if err != nil {
		t.Fatalf("find canary: %v", err)
	}
	if len(rep.Errors) > 0 {
		t.Fatalf("find canary: the scan could not read %d places, so it cannot say the canary is nowhere: %s", len(rep.Errors), strings.Join(rep.Errors, "; "))
	}
	t.Logf("find canary: %d files (%d MB), %d processes in %v; %d hits", rep.Files, rep.Bytes>>20, rep.Procs, time.Since(began).Round(time.Millisecond), len(rep.Hits))
	return rep.Hits
}

// Scan runs the canary scanner (checks/vm/canary) in the guest as root
// for the canaries (each at least 8 bytes) and returns its report.
func Scan(ctx context.Context, m *Machine, canaries [][]byte) (scan.Report, error) {
	dir, err := os.MkdirTemp("", "boxmaker-canary-")
	if err != nil {
		return scan.Report{}, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "canary")
	if err := GoBuild(ctx, bin, "./checks/vm/canary"); err != nil {
		return scan.Report{}, err
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return scan.Report{}, err
	}
	// On the disk: /run is mounted noexec. The binary holds no canary.
	const guestBin = "/usr/local/libexec/boxmaker-canary"
	if err := m.Put(ctx, guestBin, 0o700, b); err != nil {
		return scan.Report{}, err
	}
	req, err := strict.Marshal(scan.Request{Canaries: canaries})
	if err != nil {
		return scan.Report{}, err
	}
	r, err := m.Run(ctx, req, guestBin)
	if err != nil {
		return scan.Report{}, fmt.Errorf("scan: %w", err)
	}
	if r.Exit != 0 {
		return scan.Report{}, fmt.Errorf("scan: the scanner failed: %s", r)
	}
	var rep scan.Report
	if err := strict.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		return scan.Report{}, fmt.Errorf("scan: its report: %w", err)
	}
	for _, h := range rep.Hits {
		if h.Canary < 0 || h.Canary >= len(canaries) {
			return scan.Report{}, fmt.Errorf("scan: a hit for canary %d of %d", h.Canary, len(canaries))
		}
	}
	return rep, nil
}
