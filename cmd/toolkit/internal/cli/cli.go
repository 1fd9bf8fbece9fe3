// Package cli is the toolkit's command line: `toolkit TOOL` runs one tool
// call (package tools), `toolkit mcp` one MCP call in a server's container
// (package mcpcall), `toolkit egress` runs the egress proxy (package
// egress) and `toolkit probe-namespaces` reports whether the container may
// make or enter a namespace (package nsprobe, for brokerd's startup
// probe).
//
// Invariant: a command line that is not one of those forms exits 2 with
// the fixed usage sentence, never echoing what it was given; the egress
// proxy prints "ready" on stdout only once its socket is listening.
package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"wntrmute.dev/boxmaker/cmd/toolkit/internal/egress"
	"wntrmute.dev/boxmaker/cmd/toolkit/internal/nsprobe"
	"wntrmute.dev/boxmaker/cmd/toolkit/internal/tools"
	"wntrmute.dev/boxmaker/pkg/tool/hostrule"
	"wntrmute.dev/boxmaker/pkg/tool/netpolicy"
)

// Main runs the toolkit with args (without the program name) and returns
// the exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) == 0 {
		fmt.Fprintln(stderr, tools.MisuseUsage)
		return tools.ExitMisuse
	}
	if args[0] == "egress" {
		return Egress(ctx, args[1:], stdout, stderr, nil)
	}
	if len(args) == 1 && args[0] == tools.MCP {
		return tools.RunMCP(ctx, tools.DefaultEnv(stdout, stderr), stdin)
	}
	if len(args) == 1 && args[0] == ProbeNamespaces {
		return nsprobe.Report(stdout)
	}
	if len(args) != 1 {
		fmt.Fprintln(stderr, tools.MisuseUsage)
		return tools.ExitMisuse
	}
	return tools.Run(ctx, tools.DefaultEnv(stdout, stderr), args[0], stdin)
}

// ProbeNamespaces is the command that runs the namespace probe.
const ProbeNamespaces = "probe-namespaces"

// hostList collects repeated --host flags.
type hostList []hostrule.Name

func (h *hostList) String() string { return fmt.Sprint(len(*h)) }

func (h *hostList) Set(s string) error {
	n, err := hostrule.ParseName(s)
	if err != nil {
		return err
	}
	*h = append(*h, n)
	return nil
}

// Egress parses `--socket PATH --host NAME...`, listens, prints "ready"
// and serves until ctx ends. proxy, if not nil, supplies the resolver and
// dialer (tests); otherwise the system's are used.
func Egress(ctx context.Context, args []string, stdout, stderr io.Writer, proxy *egress.Proxy) int {
	fs := flag.NewFlagSet("egress", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	socket := fs.String("socket", "", "")
	var hosts hostList
	fs.Var(&hosts, "host", "")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 || *socket == "" || len(hosts) == 0 {
		fmt.Fprintln(stderr, tools.MisuseUsage)
		return tools.ExitMisuse
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	if proxy == nil {
		proxy = &egress.Proxy{Resolver: &net.Resolver{PreferGo: true}, Dialer: &net.Dialer{}}
	}
	proxy.Hosts, proxy.Log = hosts, log
	if netpolicy.Relaxed() {
		log.Warn("egress: this build carries the test-only address relaxation (boxmaker_testnet); it must never run in production")
	}
	ln, err := net.Listen("unix", *socket)
	if err != nil {
		log.Error("egress: listen", "err", err.Error())
		return tools.ExitTool
	}
	// The socket sits in a directory private to this call's two
	// containers; the tool container's user must be able to connect.
	if err := os.Chmod(*socket, 0o666); err != nil {
		ln.Close()
		log.Error("egress: chmod socket", "err", err.Error())
		return tools.ExitTool
	}
	names := make([]string, len(hosts))
	for i, h := range hosts {
		names[i] = h.String()
	}
	log.Info("egress: listening", "socket", *socket, "hosts", names)
	fmt.Fprintln(stdout, "ready")
	if err := proxy.Serve(ctx, ln); err != nil {
		log.Error("egress: serve", "err", err.Error())
		return tools.ExitTool
	}
	return tools.ExitDone
}
