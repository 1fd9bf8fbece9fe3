// Command toolkit runs inside Boxmaker's tool containers: `toolkit TOOL`
// runs one approved call of shell, read_file, write_file, http_fetch or
// consult with its input on stdin, and `toolkit egress` is the per-call
// SOCKS5 proxy through which http_fetch and consult reach the granted
// hosts. See packages
// tools and egress for their invariants; the exit codes are 0 done, 1 the
// tool's own error, 2 misuse.
package main

import (
	"os"

	"wntrmute.dev/boxmaker/cmd/toolkit/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
