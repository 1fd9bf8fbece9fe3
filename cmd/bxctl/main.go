// Command bxctl is the owner's command line for Boxmaker: chat from the
// terminal, approving or refusing waiting tool calls, memory review and
// the fleet outbox, epochs (compact) and jobs, running the local stack
// (up) or installing it on a systemd host (install), and offline checks
// (grants, the audit and consult chains, a llama-server's self-test and
// verify-device). It holds no authority of its own;
// see package cli for its commands and exit codes.
package main

import (
	"os"

	"wntrmute.dev/boxmaker/cmd/bxctl/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
