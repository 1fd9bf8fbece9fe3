package tools

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"wntrmute.dev/boxmaker/cmd/toolkit/internal/mcpcall"
	"wntrmute.dev/boxmaker/pkg/tool/mcppin"
	"wntrmute.dev/boxmaker/pkg/tool/toolinput"
)

// MCP is the command of an MCP container: `toolkit mcp`, with an
// mcppin.Call as the envelope's args (package mcpcall).
const MCP = "mcp"

// RunMCP runs `toolkit mcp`: the envelope from stdin, the declaration's
// secret written like any tool's (SecretDir/NAME, its path given to the
// server in BOXMAKER_SECRET_FILE), then the checked call, whose one
// mcppin.Result is the whole of stdout. The exit code is ExitDone
// once that result is printed, whatever its status (brokerd reads the
// status from it), ExitMisuse for an envelope that does not parse.
func RunMCP(ctx context.Context, env Env, stdin io.Reader) int {
	data, err := io.ReadAll(io.LimitReader(stdin, toolinput.MaxSize+1))
	if err != nil {
		fmt.Fprintln(env.Stderr, MisuseInput)
		return ExitMisuse
	}
	in, err := toolinput.Decode(data)
	if err != nil {
		fmt.Fprintln(env.Stderr, MisuseInput)
		return ExitMisuse
	}
	call, err := mcppin.ParseCall(in.Args)
	if err != nil {
		fmt.Fprintln(env.Stderr, MisuseInput)
		return ExitMisuse
	}
	// The server runs as this process's uid in the same container: not
	// dumpable, this process's /proc entries (its stdout, where brokerd
	// reads the result; its memory, which holds the secret) are root's,
	// so the server can neither write brokerd a result of its own nor
	// trace the toolkit. A child is dumpable again after its execve.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return report(env, failf("the toolkit could not make itself undumpable: %v; see docs/runbook.md#mcp-failed", err))
	}
	me := mcpcall.Env{Stdout: env.Stdout, Path: mcpcall.DefaultPath}
	if fi, err := os.Stat(env.EgressSocket); err == nil && fi.Mode().Type() == os.ModeSocket {
		me.EgressSocket = env.EgressSocket // the runner mounts it only for a grant with hosts
	}
	if call.Remote() {
		roots := env.RootCAs
		if roots == nil {
			if roots, err = x509.SystemCertPool(); err != nil {
				return report(env, failf("the CA bundle could not be read: %v; see docs/runbook.md#mcp-failed", err))
			}
		}
		me.RootCAs = withTestRoots(roots)
	}
	if in.Secret != nil && call.Remote() {
		// A remote server's secret is its bearer token, sent by this
		// process to its URL alone; no server process runs here to read
		// a file.
		me.Bearer, me.HasBearer = in.Secret.Value.Reveal(), true
	} else if in.Secret != nil {
		if me.SecretFile, err = writeSecret(env.SecretDir, env.SecretTmpfs, in.Secret); err != nil {
			return report(env, err)
		}
	}
	if err := mcpcall.Run(ctx, me, call); err != nil {
		return report(env, err)
	}
	return ExitDone
}
