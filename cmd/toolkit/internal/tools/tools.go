// Package tools is what runs inside a tool container: shell, read_file,
// write_file, http_fetch and consult, each reading its arguments from the one
// JSON envelope on stdin ([toolinput.Decode], then [toolargs.Parse],
// the function brokerd decided the call with); and mcp (mcp.go), an MCP
// server's call, whose arguments are brokerd's mcppin.Call.
//
// Invariants:
//   - [Run] returns [ExitDone] only when the tool did what was asked,
//     [ExitTool] when the tool itself failed (its message, on stderr, is
//     for the model), and [ExitMisuse] when the container was started
//     wrongly (an unknown tool, an envelope or arguments that do not
//     parse): then stderr holds one of the fixed sentences
//     ([MisuseInput], [MisuseUsage]) and nothing of the input;
//   - a granted secret is written only to a 0400 file in the private
//     tmpfs (SecretDir/NAME; refused if /run/boxmaker is not a tmpfs),
//     except a remote MCP server's, which is held in memory only and sent
//     as its bearer token (package mcpcall),
//     and a shell command learns only that file's path, in
//     BOXMAKER_SECRET_FILE; its environment is built from nothing, so no
//     value reaches an environment variable or argv; read_file and
//     write_file refuse the private runtime directories (/run/boxmaker,
//     /run/egress) whatever the grant says;
//   - http_fetch reaches the network only through the egress proxy's
//     Unix socket, one proxied connection per dial, so every redirect is
//     checked by the proxy again; it verifies TLS itself;
//   - consult sends the body brokerd built and logged, unchanged, once,
//     over TLS it verifies itself, through the egress proxy to the one
//     granted host, with the granted key as its bearer token; the key is
//     held in memory only, never written to a file, and never printed.
package tools

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
	"wntrmute.dev/boxmaker/pkg/tool/toolinput"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// Exit codes, part of the contract with brokerd's runner.
const (
	ExitDone   = 0
	ExitTool   = 1
	ExitMisuse = 2
)

// The fixed sentences printed on misuse. They never quote the input.
const (
	MisuseInput = "toolkit: misuse: stdin is not one valid tool input for this tool; see docs/runbook.md#toolkit-misuse"
	MisuseUsage = "toolkit: misuse: usage is toolkit shell|read_file|write_file|http_fetch|consult|mcp with the input on stdin, toolkit egress --socket PATH --host NAME..., or toolkit probe-namespaces; see docs/runbook.md#toolkit-misuse"
)

// Caps.
const (
	MaxRead = 1 << 20 // read_file's and http_fetch's output
)

// Paths inside the tool container, fixed by the runner contract.
const (
	SecretDir    = "/run/boxmaker/secrets"
	EgressSocket = "/run/egress/egress.sock"
	Shell        = "/bin/sh"
)

// Env is where a tool runs; [DefaultEnv] is the container's.
type Env struct {
	Stdout, Stderr io.Writer
	SecretDir      string
	// SecretTmpfs requires SecretDir's parent to be a tmpfs, so a
	// secret never lands on a disk if the runner failed to mount one.
	SecretTmpfs  bool
	EgressSocket string
	Shell        string
	RootCAs      *x509.CertPool // nil: the system's (the image's CA bundle)
}

// DefaultEnv is the tool container's environment.
func DefaultEnv(stdout, stderr io.Writer) Env {
	return Env{Stdout: stdout, Stderr: stderr, SecretDir: SecretDir, SecretTmpfs: true, EgressSocket: EgressSocket, Shell: Shell}
}

// toolError is a failure of the tool itself, shown to the model.
type toolError struct{ msg string }

func (e *toolError) Error() string { return e.msg }

func failf(format string, args ...any) error {
	return &toolError{fmt.Sprintf(format, args...)}
}

// Run runs tool with the envelope read from stdin and returns the exit
// code.
func Run(ctx context.Context, env Env, tool string, stdin io.Reader) int {
	if !toolset.IsGranted(tool) {
		fmt.Fprintln(env.Stderr, MisuseUsage)
		return ExitMisuse
	}
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
	if tool == toolset.Consult {
		// consult's container gets the request brokerd built and logged,
		// not the model's arguments (consult.go).
		call, err := toolargs.ParseConsultCall(in.Args)
		if err != nil {
			fmt.Fprintln(env.Stderr, MisuseInput)
			return ExitMisuse
		}
		return report(env, runConsult(ctx, env, call, in.Secret))
	}
	args, err := toolargs.Parse(tool, in.Args)
	if err != nil {
		fmt.Fprintln(env.Stderr, MisuseInput)
		return ExitMisuse
	}
	var secretFile string
	if in.Secret != nil {
		secretFile, err = writeSecret(env.SecretDir, env.SecretTmpfs, in.Secret)
		if err != nil {
			return report(env, err)
		}
	}
	switch a := args.(type) {
	case toolargs.Shell:
		return report(env, runShell(ctx, env, a, secretFile))
	case toolargs.ReadFile:
		return report(env, readFile(env, a))
	case toolargs.WriteFile:
		return report(env, writeFile(env, a))
	case toolargs.HTTPFetch:
		return report(env, fetch(ctx, env, a))
	}
	fmt.Fprintln(env.Stderr, MisuseUsage)
	return ExitMisuse
}

// report turns a tool's result into the exit code, printing a tool error
// as the last stderr line.
func report(env Env, err error) int {
	if err == nil {
		return ExitDone
	}
	var te *toolError
	if errors.As(err, &te) {
		fmt.Fprintln(env.Stderr, te.msg)
	} else {
		fmt.Fprintln(env.Stderr, err.Error())
	}
	return ExitTool
}

// writeSecret writes the secret to dir/NAME, mode 0400, creating dir
// (0700) in the private tmpfs the runner mounts, and returns the path.
// With tmpfs set it refuses unless dir's parent is a tmpfs.
func writeSecret(dir string, tmpfs bool, s *toolinput.Secret) (string, error) {
	if tmpfs {
		var st syscall.Statfs_t
		if err := syscall.Statfs(filepath.Dir(dir), &st); err != nil || st.Type != tmpfsMagic {
			return "", failf("the secret could not be placed: %s is not a private tmpfs; see docs/runbook.md#toolkit-runtime-dirs", filepath.Dir(dir))
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", failf("the secret could not be placed: %v; see docs/runbook.md#toolkit-runtime-dirs", err)
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return "", failf("the secret could not be placed: %s is not a directory; see docs/runbook.md#toolkit-runtime-dirs", dir)
	}
	p := filepath.Join(dir, s.Name) // Name matches ^[A-Z][A-Z0-9_]*$: one element
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o400)
	if err != nil {
		return "", failf("the secret could not be placed: %v; see docs/runbook.md#toolkit-runtime-dirs", err)
	}
	if _, err := io.WriteString(f, s.Value.Reveal()); err != nil {
		f.Close()
		return "", failf("the secret could not be placed: %v; see docs/runbook.md#toolkit-runtime-dirs", err)
	}
	if err := f.Close(); err != nil {
		return "", failf("the secret could not be placed: %v; see docs/runbook.md#toolkit-runtime-dirs", err)
	}
	return p, nil
}
