// Command canary is the VM tests' canary scanner, run as root in the
// guest: it reads byte strings (the canaries) as strict JSON on stdin and
// reports, as one JSON document on stdout, every place that holds one:
// each regular file on every mounted filesystem but the kernel's own
// (proc, sysfs and the other pseudo filesystems, which hold no stored
// data), and every process's /proc/<pid>/environ and cmdline.
//
// Invariant: the canaries exist only in its memory; they never reach its
// arguments, environment, output or any file, so it cannot find a copy it
// made itself. A place it could not read is reported as an error, never
// passed over silently (a file or process that vanished mid-scan is not
// an error: it holds nothing any more).
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"wntrmute.dev/boxmaker/checks/vm/canary/scan"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

// pseudo are the filesystem types whose files are the kernel's views, not
// stored bytes: reading them proves nothing and some never end.
var pseudo = map[int64]string{
	0x9fa0: "proc", 0x62656572: "sysfs", 0x6e736673: "nsfs", 0x63677270: "cgroup2", 0x27e0eb: "cgroup",
	0x64626720: "debugfs", 0x74726163: "tracefs", 0x73636673: "securityfs", 0xcafe4a11: "bpf",
	0x1cd1: "devpts", 0x19800202: "mqueue", 0x62656570: "configfs", 0x65735543: "fusectl",
	0x42494e4d: "binfmt_misc", 0x6165676c: "pstore", 0xde5e81e4: "efivarfs", 0x50495045: "pipefs",
}

func main() {
	in, err := io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	if err != nil {
		fail(err)
	}
	var req scan.Request
	if err := strict.Unmarshal(in, &req); err != nil {
		fail(err)
	}
	if len(req.Canaries) == 0 {
		fail(errors.New("no canaries"))
	}
	for _, c := range req.Canaries {
		if len(c) < 8 {
			fail(errors.New("a canary shorter than 8 bytes would match by chance"))
		}
	}
	s := scan.New(req.Canaries)
	// Empty, not null: the host decodes the report strictly.
	rep := scan.Report{Hits: []scan.Hit{}, Skipped: []string{}, Errors: []string{}}
	note := func(err error) {
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ESRCH) {
			rep.Errors = append(rep.Errors, err.Error())
		}
	}
	self := os.Getpid()
	procs, err := os.ReadDir("/proc")
	if err != nil {
		fail(err)
	}
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		rep.Procs++
		for _, f := range []string{"environ", "cmdline"} {
			p := filepath.Join("/proc", e.Name(), f)
			b, err := os.ReadFile(p)
			if err != nil {
				note(err)
				continue
			}
			for _, i := range s.In(b) {
				rep.Hits = append(rep.Hits, scan.Hit{Canary: i, Kind: f, Path: p, Comm: comm(e.Name())})
			}
		}
	}
	kinds := map[uint64]string{} // device -> "" to read, or the pseudo type skipped
	err = filepath.WalkDir("/", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			note(err)
			return nil
		}
		if p == "/proc" || p == "/sys" {
			return fs.SkipDir
		}
		if !d.Type().IsRegular() && !d.IsDir() {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			note(err)
			return nil
		}
		dev := fi.Sys().(*syscall.Stat_t).Dev
		kind, ok := kinds[dev]
		if !ok {
			var st syscall.Statfs_t
			if err := syscall.Statfs(p, &st); err != nil {
				note(err)
				return nil
			}
			kind = pseudo[int64(st.Type)]
			kinds[dev] = kind
			if kind != "" {
				rep.Skipped = append(rep.Skipped, p+" ("+kind+")")
			}
		}
		if kind != "" {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		hits, n, err := s.File(p)
		if err != nil {
			note(err)
		}
		rep.Files++
		rep.Bytes += n
		for _, i := range hits {
			rep.Hits = append(rep.Hits, scan.Hit{Canary: i, Kind: "file", Path: p})
		}
		return nil
	})
	if err != nil {
		fail(err)
	}
	out, err := strict.Marshal(rep)
	if err != nil {
		fail(err)
	}
	os.Stdout.Write(append(out, '\n'))
}

func comm(pid string) string {
	b, _ := os.ReadFile(filepath.Join("/proc", pid, "comm"))
	return string(bytes.TrimSpace(b))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "canary:", err)
	os.Exit(1)
}
