// Package mcpcall is `toolkit mcp`: inside a fresh container of an MCP
// server's own image (the toolkit mounted read-only beside it), it starts
// the server's command and speaks MCP to it over stdio with the official
// Go SDK; for a remote server, inside a fresh container of brokerd's tool
// image, it speaks Streamable HTTP to the server's URL through the call's
// egress proxy (remote.go). Either way it checks the server's live tool
// listing against the owner's pin, and only then makes the one call
// brokerd decided; or, for `bxctl mcp pin`, only lists the tools.
//
// # Invariants
//
//   - Nothing is called unless the whole live listing's sum and the
//     called tool's sum equal the pinned ones brokerd sent
//     (mcppin.Call): any changed description or schema, any added,
//     removed or renamed tool is drift, reported with the live listing
//     (for the owner's re-pin proposal) and nothing else.
//   - What is printed on stdout is exactly one mcppin.Result, whatever
//     happens: brokerd reads that envelope and never the server's bytes.
//     Text content is capped at mcppin.MaxText in all; images, audio,
//     embedded resources and links are described in one line, never
//     inlined; a description the server could fill is escaped.
//   - The server's process gets an environment built from nothing (PATH,
//     HOME=/tmp, and, when the declaration names one, the path of its one
//     secret, which lives in the container's private tmpfs; when the grant
//     names hosts, HTTPS_PROXY, the bridge to the call's egress proxy,
//     bridge.go); its stderr is kept, capped, only for a failure's detail.
//   - The client offers the server no capability: no sampling, no
//     elicitation, no roots (an empty capabilities object, not the SDK's
//     default, which offers roots). A server cannot reach the model or
//     the owner.
package mcpcall

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/tool/mcppin"
)

// Env is where the call runs.
type Env struct {
	Stdout io.Writer
	// SecretFile is the path of the written secret, or "".
	SecretFile string
	// EgressSocket is the call's egress proxy, or "" when the grant
	// names no host (then the container has no network at all).
	EgressSocket string
	// Path is the server's PATH.
	Path string
	// Bearer is a remote server's secret, sent as its bearer token when
	// HasBearer (a remote server's secret is never written to a file).
	Bearer    string
	HasBearer bool
	// RootCAs verify a remote server's certificate; nil: the system's
	// (the image's CA bundle).
	RootCAs *x509.CertPool
}

// DefaultPath is the server's PATH in its container.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Run carries out call and prints its Result. It returns an error only
// when the Result could not be printed.
func Run(ctx context.Context, env Env, call mcppin.Call) error {
	r := run(ctx, env, call)
	b, err := strict.Marshal(r)
	if err != nil {
		b, _ = strict.Marshal(failed("the result could not be encoded: " + err.Error()))
	}
	_, err = env.Stdout.Write(b)
	return err
}

func failed(detail string) mcppin.Result {
	return mcppin.Result{Status: mcppin.StatusFailed, Content: []mcppin.Content{}, Detail: oneLine(detail)}
}

// maxStderr caps the server's stderr kept for a failure's detail.
const maxStderr = 2 << 10

func run(ctx context.Context, env Env, call mcppin.Call) mcppin.Result {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if call.Remote() {
		t, err := remoteTransport(env, call)
		if err != nil {
			return failed(err.Error())
		}
		return session(ctx, t, call, &capped{max: maxStderr})
	}
	cmd := exec.CommandContext(ctx, call.Command[0], call.Command[1:]...)
	cmd.Env = []string{"PATH=" + env.Path, "HOME=/tmp"}
	if env.SecretFile != "" {
		cmd.Env = append(cmd.Env, "BOXMAKER_SECRET_FILE="+env.SecretFile)
	}
	cmd.Dir = "/tmp"
	if env.EgressSocket != "" {
		b, err := startBridge(ctx, env.EgressSocket)
		if err != nil {
			return failed("the way out through the egress proxy could not be opened: " + err.Error())
		}
		defer b.close()
		cmd.Env = append(cmd.Env, "HTTPS_PROXY="+b.URL(), "https_proxy="+b.URL(), "NODE_USE_ENV_PROXY=1")
	}
	stderr := &capped{max: maxStderr}
	cmd.Stderr = stderr
	return session(ctx, &mcp.CommandTransport{Command: cmd}, call, stderr)
}

// session speaks MCP over t: the listing, checked against the pin, then
// the one call. stderr is a stdio server's, for a failure's detail.
func session(ctx context.Context, t mcp.Transport, call mcppin.Call, stderr *capped) mcppin.Result {
	// No capabilities: the SDK's default (nil options) advertises roots
	// and answers roots/list; this client offers the server nothing to ask.
	client := mcp.NewClient(&mcp.Implementation{Name: "boxmaker-toolkit", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		return failed(fmt.Sprintf("the server did not start or answer MCP's initialize: %v%s", err, stderr.tail()))
	}
	defer cs.Close()
	tools, err := listing(ctx, cs)
	if err != nil {
		return failed(err.Error() + stderr.tail())
	}
	if call.Listing() {
		return mcppin.Result{Status: mcppin.StatusListing, Content: []mcppin.Content{}, Listing: tools}
	}
	if d := drift(tools, call); d != "" {
		return mcppin.Result{Status: mcppin.StatusDrift, Content: []mcppin.Content{}, Detail: d, Listing: tools}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: call.Tool, Arguments: call.Arguments})
	if err != nil {
		return failed(fmt.Sprintf("the call failed: %v", err))
	}
	out := mcppin.Result{Status: mcppin.StatusOK}
	if res.IsError {
		out.Status = mcppin.StatusToolError
	}
	out.Content, out.Truncated = contents(res)
	return out
}

// listing reads every page of the server's tools, at most MaxTools, in
// pin form. A page with no tool that names a next page is refused: a
// server paging forever through empty pages would otherwise hold the
// call until its time limit (every other page brings a tool, so MaxTools
// bounds the pages too).
func listing(ctx context.Context, cs *mcp.ClientSession) ([]mcppin.Tool, error) {
	var listed []mcppin.Listed
	params := &mcp.ListToolsParams{}
	for {
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return nil, fmt.Errorf("the server's tool listing failed: %v", err)
		}
		if len(res.Tools) == 0 && res.NextCursor != "" {
			return nil, errors.New("the server's tool listing has an empty page that names a next page")
		}
		for _, t := range res.Tools {
			if len(listed) == mcppin.MaxTools {
				return nil, fmt.Errorf("the server lists more than %d tools", mcppin.MaxTools)
			}
			schema, err := json.Marshal(t.InputSchema)
			if err != nil {
				return nil, fmt.Errorf("tool %q: its input schema does not encode: %v", t.Name, err)
			}
			listed = append(listed, mcppin.Listed{Name: t.Name, Description: t.Description, InputSchema: schema})
		}
		if res.NextCursor == "" {
			break
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
	tools, err := mcppin.NewListing(listed)
	if err != nil {
		return nil, fmt.Errorf("the server's tool listing cannot be pinned: %v", err)
	}
	return tools, nil
}

// drift says how the live listing differs from the pinned sums, or "".
func drift(tools []mcppin.Tool, call mcppin.Call) string {
	var called *mcppin.Tool
	for i := range tools {
		if tools[i].Name == call.Tool {
			called = &tools[i]
		}
	}
	switch {
	case called == nil:
		return fmt.Sprintf("the server no longer lists tool %q (renamed or removed)", call.Tool)
	case called.SHA256 != call.ToolSHA256:
		return fmt.Sprintf("tool %q's description or input schema differs from the pin", call.Tool)
	case mcppin.ListingSum(tools) != call.ListingSHA256:
		return "another tool of the server was added, removed, renamed or changed since the pin"
	}
	return ""
}

// contents turns a result's content into the envelope's: text kept up
// to MaxText in all, everything else described.
func contents(res *mcp.CallToolResult) ([]mcppin.Content, bool) {
	out := []mcppin.Content{}
	left, cut := mcppin.MaxText, false
	text := func(s string) {
		if len(s) > left {
			s, cut = truncate(s, left), true
		}
		left -= len(s)
		out = append(out, mcppin.Content{Type: "text", Text: s})
	}
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			text(c.Text)
		case *mcp.ImageContent:
			out = append(out, described(fmt.Sprintf("[an image, %s, %d bytes, not shown]", c.MIMEType, len(c.Data))))
		case *mcp.AudioContent:
			out = append(out, described(fmt.Sprintf("[audio, %s, %d bytes, not played]", c.MIMEType, len(c.Data))))
		case *mcp.ResourceLink:
			out = append(out, described(fmt.Sprintf("[a link to resource %s (%s), not followed]", c.URI, c.MIMEType)))
		case *mcp.EmbeddedResource:
			if c.Resource == nil {
				continue
			}
			n := len(c.Resource.Text) + len(c.Resource.Blob)
			out = append(out, described(fmt.Sprintf("[an embedded resource %s (%s), %d bytes, not shown]", c.Resource.URI, c.Resource.MIMEType, n)))
		default:
			out = append(out, described("[content of a kind this toolkit does not show]"))
		}
	}
	if len(res.Content) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			text(string(b))
		}
	}
	return out, cut
}

// described is a one-line description, its server-written parts escaped
// of line breaks and capped.
func described(s string) mcppin.Content {
	return mcppin.Content{Type: "described", Text: oneLine(s)}
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(strings.ToValidUTF8(s, "\uFFFD")), " ")
	return truncate(s, 400)
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// capped keeps the last max bytes written to it.
type capped struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if over := c.buf.Len() - c.max; over > 0 {
		c.buf.Next(over)
	}
	return len(p), nil
}

// tail is the kept stderr as a suffix for a failure's detail.
func (c *capped) tail() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf.Len() == 0 {
		return ""
	}
	return " (the server's stderr ends: " + oneLine(c.buf.String()) + ")"
}
