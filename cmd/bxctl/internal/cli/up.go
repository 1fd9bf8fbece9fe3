package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"wntrmute.dev/boxmaker/cmd/bxctl/internal/up"
)

// runUp is `bxctl up`: the local stack from a state directory (package
// up). It stops every role on Ctrl-C (exit 0) or when any of them stops
// (exit 1).
func runUp(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("up", stderr)
	stateFlag := fs.String("state", "", "state `directory` (default $BOXMAKER_STATE, else ./.boxmaker, or "+up.DevRoot+"/state as root)")
	o := up.Options{ServerModel: discoverModel}
	fs.StringVar(&o.Llama, "llama", "127.0.0.1:8080", "llama-server's `host:port`")
	fs.StringVar(&o.Model, "model", "", "model `name` for loopd's first config (default: what the server reports)")
	fs.StringVar(&o.Bin, "bin", "", "`directory` holding the role binaries (default: bxctl's own)")
	fs.StringVar(&o.ToolImage, "tool-image", "", "tool image `ID` (sha256:...) for brokerd's first config; with it, bxctl runs a Podman service for the tool containers")
	fs.StringVar(&o.Podman, "podman", "", "podman `binary` for that service (default: podman on PATH)")
	fs.DurationVar(&o.ReadyTimeout, "ready-timeout", 5*time.Minute, "how long a role may take to start (loopd runs its self-test first)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return ExitUsage
	}
	state, err := resolveState(*stateFlag)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl up: %v\n", err)
		return ExitUsage
	}
	o.State = state
	if err := up.Run(ctx, o, stdout); err != nil {
		fmt.Fprintf(stderr, "bxctl up: %v\n", err)
		return ExitFailed
	}
	return ExitOK
}
