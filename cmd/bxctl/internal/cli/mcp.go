package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/ownership"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/escape"
	"wntrmute.dev/boxmaker/pkg/tool/mcppin"
	"wntrmute.dev/boxmaker/pkg/tool/mcpserver"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// runMCP is `bxctl mcp pin NAME`: brokerd runs the declared server in a
// fresh container with no network, no mount and no secret (admin.sock
// mcp_list; a remote server is listed from a toolkit container whose only
// network is an egress proxy to its host, with its secret), and the owner reads every tool's name, description and
// input schema, escaped, beside what changed from the current pin. With
// --write --expect SUM it writes that listing as mcp/NAME.pin.json (mode
// 0640, whole), only if the listing's sum is the one the owner read and
// brokerd's own loader accepts the directory with it. --proposal shows
// (and writes) brokerd's re-pin proposal from an mcp-drift instead of
// asking for a fresh listing.
func runMCP(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const use = "usage: bxctl mcp pin [--state DIR] [--mcp DIR] [--owner-uid N] [--proposal] [--write --expect SUM] NAME"
	if len(args) == 0 || args[0] != "pin" {
		fmt.Fprintln(stderr, use)
		return ExitUsage
	}
	fs := flags("mcp pin", stderr)
	stateFlag := fs.String("state", "", "state `directory` (default $BOXMAKER_STATE, else ./.boxmaker)")
	dirFlag := fs.String("mcp", "", "the mcp `directory` brokerd reads (default STATE/mcp: beside the grants)")
	owner := fs.Int("owner-uid", os.Getuid(), "the owner's uid, as brokerd.toml's owner_uid")
	proposal := fs.Bool("proposal", false, "show brokerd's re-pin proposal (from an mcp-drift) instead of listing the server afresh")
	write := fs.Bool("write", false, "write the listing as the pin (needs --expect)")
	expect := fs.String("expect", "", "the listing `sha256` you read, as this command printed it")
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() != 1 || *owner < 0 || int64(*owner) > math.MaxUint32 || *write != (*expect != "") {
		fmt.Fprintln(stderr, use)
		return ExitUsage
	}
	name := fs.Arg(0)
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "bxctl mcp pin: "+format+"\n", a...)
		return ExitFailed
	}
	if !toolset.ServerPattern.MatchString(name) {
		return fail("%q is not a server name (lowercase letters, digits and '-', starting with a letter)", escape.Line(name))
	}
	state, err := resolveState(*stateFlag)
	if err != nil {
		return fail("%v", err)
	}
	dir := *dirFlag
	if dir == "" {
		dir = mcpserver.DirBeside(layout.Grants.In(state))
	}
	owners := ownership.Trust(uint32(*owner))
	cat, err := mcpserver.LoadDir(dir, owners)
	if err != nil {
		return fail("%v", err)
	}
	e, ok := cat.Lookup(name)
	if !ok {
		return fail("no server %s is declared: write %s first (docs/design.md#mcp-servers); see docs/runbook.md#mcp-unpinned", name, filepath.Join(dir, name+".toml"))
	}
	var pin mcppin.Pin
	if *proposal {
		pin, err = readProposal(state, name)
	} else {
		pin, err = listOverAdmin(ctx, state, name)
	}
	if err != nil {
		return fail("%v", err)
	}
	if pin.Image != e.Server.Image() || pin.URL != e.Server.URL() {
		return fail("the listing is of %s, but %s.toml now names %s: pin again without --proposal", pinFrom(pin), name, e.Server.Source())
	}
	showPin(stdout, pin, e.Pin)
	if !*write {
		fmt.Fprintf(stdout, "\nnot written. To pin exactly this listing: bxctl mcp pin --write --expect %s%s %s\n", pin.ListingSHA256, map[bool]string{true: " --proposal"}[*proposal], name)
		return ExitOK
	}
	if *expect != pin.ListingSHA256 {
		return fail("the listing's sha256 is %s, not the %s you expected: it changed since you read it; nothing written (read it again)", pin.ListingSHA256, escape.Line(*expect))
	}
	text, err := pin.Encode()
	if err != nil {
		return fail("%v", err)
	}
	target := filepath.Join(dir, mcpserver.PinFile(name))
	if err := writePin(dir, mcpserver.PinFile(name), text); err != nil {
		return fail("writing %s: %v", target, err)
	}
	if cat, err := mcpserver.LoadDir(dir, owners); err != nil {
		return fail("%s was written, but brokerd's loader refuses the directory with it: %v", target, err)
	} else if e, _ := cat.Lookup(name); e.Pin == nil {
		return fail("%s was written, but the server is still unpinned: %s", target, e.Why)
	}
	fmt.Fprintf(stdout, "pinned: %s (%d tools, listing sha256 %s); brokerd reads it at the next call\n", target, len(pin.Tools), pin.ListingSHA256)
	return ExitOK
}

// listOverAdmin asks brokerd for the server's live listing.
func listOverAdmin(ctx context.Context, state, name string) (mcppin.Pin, error) {
	l, err := ask[*wire.MCPListing](ctx, state, &wire.Admin, &wire.MCPList{Server: name})
	if err != nil {
		return mcppin.Pin{}, err
	}
	tools := make([]mcppin.Tool, len(l.Tools))
	for i, t := range l.Tools {
		tools[i] = mcppin.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, SHA256: t.SHA256}
	}
	// NewPin recomputes every sum: brokerd's relay is checked, not trusted.
	if l.URL != "" {
		return mcppin.NewRemotePin(name, l.URL, tools)
	}
	return mcppin.NewPin(name, l.Image, tools)
}

// readProposal reads brokerd's re-pin proposal for name.
func readProposal(state, name string) (mcppin.Pin, error) {
	p := filepath.Join(layout.Proposals.In(state), "mcp-"+name+".pin.json")
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return mcppin.Pin{}, fmt.Errorf("no re-pin proposal for %s (%s): brokerd writes one only after an mcp-drift", name, p)
	}
	if err != nil {
		return mcppin.Pin{}, err
	}
	pin, err := mcppin.ParsePin(b)
	if err == nil && pin.Server != name {
		err = fmt.Errorf("%s is a proposal for %q", p, pin.Server)
	}
	return pin, err
}

// showPin prints each tool of pin escaped, marked against the current
// pin (nil: none): + new, ~ changed, = same; and - for a tool gone.
func showPin(w io.Writer, pin mcppin.Pin, cur *mcppin.Pin) {
	fmt.Fprintf(w, "server %s, %s: %d tools, listing sha256 %s\n", pin.Server, pinFrom(pin), len(pin.Tools), pin.ListingSHA256)
	if cur == nil {
		fmt.Fprintln(w, "(no current pin: every tool is new)")
	} else if cur.ListingSHA256 == pin.ListingSHA256 {
		fmt.Fprintln(w, "(the same as the current pin)")
	}
	for _, t := range pin.Tools {
		mark := "+"
		if cur != nil {
			if old, ok := cur.Lookup(t.Name); ok {
				mark = map[bool]string{true: "=", false: "~"}[old.SHA256 == t.SHA256]
			}
		}
		fmt.Fprintf(w, "\n%s tool %s\n  description:\n%s\n  input schema: %s\n", mark, escape.Line(t.Name), indent(escape.Text(t.Description)), escape.Line(t.InputSchema))
	}
	if cur != nil {
		for _, t := range cur.Tools {
			if _, ok := pin.Lookup(t.Name); !ok {
				fmt.Fprintf(w, "\n- tool %s (in the current pin, no longer listed)\n", escape.Line(t.Name))
			}
		}
	}
}

// pinFrom is what pin was taken from: "image ID", or "url URL" for a
// remote server.
func pinFrom(pin mcppin.Pin) string {
	if pin.URL != "" {
		return "url " + escape.Line(pin.URL)
	}
	return "image " + pin.Image
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "    " + l
	}
	return strings.Join(lines, "\n")
}

// writePin writes dir/name whole, as writeOwnerFile does.
func writePin(dir, name string, text []byte) error {
	return writeOwnerFile(dir, name, text, "bxctl mcp pin")
}
