// Command bxctl is the owner's command line for Boxmaker: checks and
// maintenance today, chat and approvals as those roles land. See package
// cli for its commands and exit codes.
package main

import (
	"os"

	"wntrmute.dev/boxmaker/cmd/bxctl/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
