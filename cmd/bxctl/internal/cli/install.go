package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"wntrmute.dev/boxmaker/cmd/bxctl/internal/install"
	"wntrmute.dev/boxmaker/pkg/host/ownership"
	"wntrmute.dev/boxmaker/pkg/host/units"
)

// runInstall is `bxctl install`: Boxmaker on a systemd host that is not
// NixOS, from the unit table (package install).
func runInstall(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("install", stderr)
	var o install.Options
	fs.StringVar(&o.Images, "images", "", "`directory` holding each role's image (ROLE.tar), tool.tar and images.ids, as docs/units.md builds them; it and they must be root's or yours and writable by no one else (required)")
	fs.StringVar(&o.Expect, "expect", "", "images.ids' `digest` (sha256:HEX, as sha256sum printed it where you built the images): any other set of images is refused")
	fs.StringVar(&o.State, "state", units.StateDir, "state `directory`")
	fs.StringVar(&o.Podman, "podman", "/usr/bin/podman", "the Podman 5 `binary` brokerd's user runs")
	fs.StringVar(&o.Llama, "llama", "", "llama-server's `ip:port`; inferproxy may reach only that address (required)")
	fs.StringVar(&o.Model, "model", "default", "the model's `name` for loopd's first config")
	fs.StringVar(&o.MattermostNet, "mattermost-net", "", "the `addresses` (space-separated addresses or prefixes) gatewayd may reach: Mattermost's and the resolver's")
	fs.StringVar(&o.HonchoNet, "honcho-net", "", "the `addresses` memoryd may reach (Honcho's); none by default")
	fs.StringVar(&o.GatewayConfig, "gateway-config", "", "the owner's gatewayd.toml (`file`, see deploy/gatewayd.toml); without it gatewayd is not installed")
	fs.BoolVar(&o.ReplaceGatewayConfig, "replace-gateway-config", false, "install --gateway-config over an installed gatewayd.toml that differs from it (without it, a difference is refused and shown)")
	fromStdin := map[string]*bool{}
	for _, s := range install.StdinFlags {
		fromStdin[s.Credential] = fs.Bool(s.Flag, false, s.Usage)
	}
	noStart := fs.Bool("no-start", false, "write and enable the units without starting them")
	fs.StringVar(&o.UnitDir, "unit-dir", "/etc/systemd/system", "where the units are written (`directory`)")
	fs.StringVar(&o.ImageRoot, "image-root", "/usr/local/lib/boxmaker/images", "where the role images are unpacked (`directory`)")
	fs.StringVar(&o.CredDir, "credential-dir", "/etc/boxmaker/credentials", "where the encrypted credentials are written (`directory`)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || o.Images == "" || o.Llama == "" {
		if err == nil {
			fmt.Fprintln(stderr, "bxctl install: --images and --llama are required")
		}
		return ExitUsage
	}
	o.Start, o.Etc = !*noStart, "/etc"
	if e := strings.TrimPrefix(o.Expect, "sha256:"); o.Expect != "" && (len(e) != 64 || strings.Trim(e, "0123456789abcdef") != "") {
		fmt.Fprintln(stderr, "bxctl install: --expect is sha256: and 64 lowercase hex digits (sha256sum images.ids)")
		return ExitUsage
	}
	if o.Expect != "" && !strings.HasPrefix(o.Expect, "sha256:") {
		o.Expect = "sha256:" + o.Expect
	}
	o.Owners = installer()
	var names []string
	for _, s := range install.StdinFlags {
		if *fromStdin[s.Credential] {
			names = append(names, s.Credential)
		}
	}
	secrets, err := install.ReadSecrets(os.Stdin, names)
	if err != nil {
		fmt.Fprintf(stderr, "bxctl %v\n", err)
		return ExitFailed
	}
	if err := install.Run(ctx, o, install.RealHost(), secrets, stdout); err != nil {
		fmt.Fprintf(stderr, "bxctl %v\n", err)
		return ExitFailed
	}
	return ExitOK
}

// installer is who besides root may have written the install's inputs:
// the user who ran sudo (SUDO_UID), who built or copied the images. Only
// root can set a sudo process's environment, and root is trusted anyway.
func installer() ownership.Owners {
	if n, err := strconv.ParseUint(os.Getenv("SUDO_UID"), 10, 32); err == nil {
		return ownership.Trust(uint32(n))
	}
	return ownership.Trust()
}
