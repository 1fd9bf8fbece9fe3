package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/text/sanitize"
	"wntrmute.dev/boxmaker/pkg/tool/mcppin"
	"wntrmute.dev/boxmaker/pkg/tool/mcpserver"
)

// runMCP runs an allowed MCP call and hands back what the toolkit's
// envelope says, never the server's own bytes: brokerd parses the
// toolkit's strict, capped mcppin.Result and nothing else. Every
// outcome that ran is recorded with the pin's listing sum and the hash of
// the text handed back; the text is labelled with the grant's class and
// trust (untrusted unless the grant says otherwise), neutralised (chat
// template markup rewritten), and capped like every tool result. A
// listing that drifted from the pin is refused (mcp-drift) and leaves a
// re-pin proposal for the owner.
func (b *Broker) runMCP(ctx context.Context, seq int64, d policy.Decision, m policy.MCPCall) *wire.ToolResult {
	out, err := b.runner.Run(ctx, d)
	if err != nil {
		b.log.Warn("run failed", "decision", seq, "err", err.Error())
		return &wire.ToolResult{Status: wire.StatusFailed, Output: "the call could not be run: " + err.Error(), Label: dataclass.Label{Class: dataclass.Public}}
	}
	release := func(text string, exit int, status wire.ToolStatus) *wire.ToolResult {
		return b.releasePinned(seq, text, exit, status, d.Class(), d.Untrusted(), m.ListingSHA256)
	}
	if out.Stopped != "" || out.Exit != 0 {
		return release(sanitize.Neutralise(resultText(out)), max(out.Exit, 1), wire.StatusFailed)
	}
	r, err := mcppin.ParseResult([]byte(out.Stdout))
	if err != nil {
		return release(fmt.Sprintf("the MCP container gave no valid result (%v); see docs/runbook.md#mcp-failed", err), 1, wire.StatusFailed)
	}
	switch r.Status {
	case mcppin.StatusDrift:
		note := b.proposeRepin(m, r.Listing)
		return release(fmt.Sprintf("mcp-drift: %s refused: %s, so nothing was called; %s; see docs/runbook.md#mcp-drift",
			d.Tool(), sanitize.Neutralise(r.Detail), note), 1, wire.StatusDenied)
	case mcppin.StatusFailed:
		return release(sanitize.Neutralise("the MCP server failed: "+r.Detail+"; see docs/runbook.md#mcp-failed"), 1, wire.StatusFailed)
	case mcppin.StatusOK, mcppin.StatusToolError:
	default:
		return release("the MCP container answered a call with a listing; see docs/runbook.md#mcp-failed", 1, wire.StatusFailed)
	}
	var parts []string
	for _, c := range r.Content {
		parts = append(parts, c.Text)
	}
	text := sanitize.Neutralise(strings.Join(parts, "\n"))
	if r.Truncated {
		text += fmt.Sprintf("\n[the toolkit cut the server's text at %d bytes]", mcppin.MaxText)
	}
	if r.Status == mcppin.StatusToolError {
		return release(text, 1, wire.StatusFailed)
	}
	return release(text, 0, wire.StatusRan)
}

// proposeRepin writes the live listing as a pin proposal,
// proposals/mcp-SERVER.pin.json (brokerd never writes the owner's mcp
// directory), and says where it is for the answer.
func (b *Broker) proposeRepin(m policy.MCPCall, listing []mcppin.Tool) string {
	pin, err := m.Server.NewPin(listing)
	var text []byte
	if err == nil {
		text, err = pin.Encode()
	}
	if err == nil {
		err = writeRepin(layout.Proposals.In(b.cfg.StateDir), "mcp-"+m.Server.Name()+".pin.json", text)
	}
	if err != nil {
		b.log.Error("re-pin proposal not written; see docs/runbook.md#mcp-drift", "server", m.Server.Name(), "err", err.Error())
		return "no re-pin proposal could be written"
	}
	b.log.Warn("MCP server's listing drifted from its pin; a re-pin proposal waits for the owner", "server", m.Server.Name())
	return "the owner can review the server's new listing with bxctl mcp pin " + m.Server.Name() + " --proposal"
}

// writeRepin writes name in dir whole (a temporary file, renamed), 0640.
func writeRepin(dir, name string, text []byte) error {
	if err := os.Mkdir(dir, 0o750); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	f, err := os.CreateTemp(dir, ".repin-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(text)
	if err == nil {
		err = f.Chmod(0o640)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(f.Name(), filepath.Join(dir, name))
}

// mcpList answers bxctl mcp pin on admin.sock: the declared server's live
// listing, taken in a fresh container of its image with no network, no
// mount and no secret (policy.ListTools; a remote server: a toolkit
// container reaching its host alone, with its secret), relayed in pin form for the
// owner to read; brokerd writes nothing.
func (b *Broker) mcpList(ctx context.Context, m *wire.MCPList) strict.Variant {
	cat, err := mcpserver.LoadDir(b.cfg.MCPDir(), b.cfg.Owners())
	if err != nil {
		return wire.Errorf("mcp_list", wire.Invalid, "%v", err)
	}
	e, ok := cat.Lookup(m.Server)
	if !ok {
		return wire.Errorf("mcp_list", wire.Invalid, "no server %q is declared in %s (NAME.toml); see docs/runbook.md#mcp-unpinned", m.Server, b.cfg.MCPDir())
	}
	b.log.Info("listing an MCP server's tools for the owner", "server", m.Server, "from", e.Server.Source())
	out, err := b.runner.Run(ctx, policy.ListTools(e.Server, b.now()))
	if err != nil {
		return wire.Errorf("mcp_list", wire.Unavailable, "the server's container could not be run: %v", err)
	}
	r, perr := mcppin.ParseResult([]byte(out.Stdout))
	switch {
	case out.Stopped != "":
		return wire.Errorf("mcp_list", wire.Unavailable, "brokerd stopped the listing: %s; see docs/runbook.md#mcp-failed", out.Stopped)
	case perr != nil:
		return wire.Errorf("mcp_list", wire.Unavailable, "the MCP container gave no valid listing (%v); see docs/runbook.md#mcp-failed", perr)
	case r.Status != mcppin.StatusListing:
		return wire.Errorf("mcp_list", wire.Unavailable, "the server could not be listed: %s; see docs/runbook.md#mcp-failed", r.Detail)
	}
	tools := make([]wire.ListedTool, len(r.Listing))
	for i, t := range r.Listing {
		tools[i] = wire.ListedTool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, SHA256: t.SHA256}
	}
	return &wire.MCPListing{Server: m.Server, Image: e.Server.Image(), URL: e.Server.URL(), Tools: tools}
}
