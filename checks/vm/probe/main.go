// Command probe is the VM tests' container image: one static binary that
// prints, as one JSON line, what the container sees of its identity and
// its cgroup (uid, gid, the uid map, its cgroup's path and its pids.max and
// memory.max), then sleeps for the seconds given as its argument, if any.
// It is built on the host with CGO_ENABLED=0, copied into the guest over
// the command channel and imported as an image holding nothing else, as a
// role image holds only its binary.
package main

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			return "error: " + err.Error()
		}
		return strings.TrimSpace(string(b))
	}
	out := map[string]any{
		"uid":        os.Getuid(),
		"gid":        os.Getgid(),
		"uid_map":    strings.Fields(read("/proc/self/uid_map")),
		"cgroup":     read("/proc/self/cgroup"),
		"pids_max":   read("/sys/fs/cgroup/pids.max"),
		"memory_max": read("/sys/fs/cgroup/memory.max"),
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(1)
	}
	if len(os.Args) > 1 {
		if n, err := strconv.Atoi(os.Args[1]); err == nil {
			time.Sleep(time.Duration(n) * time.Second)
		}
	}
}
