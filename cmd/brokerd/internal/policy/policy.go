// Package policy decides brokerd's tool calls: pure functions from the
// owner's grants, one request and the session's state to a [Decision], an
// [Ask] or a [Denial]. It does no I/O and reads no clock: the caller
// passes the time.
//
// # Invariants
//
//   - A tool runs only with a valid [Decision], and only this package can
//     make one: Decision holds an unexported pointer, so code elsewhere can
//     only write the zero value, which [Decision.Valid] refuses, and no
//     decoder can fill it. A test compiles forgeries against the package
//     and scans the tree for unsafe or reflect next to it.
//   - [Decide] never returns a Decision for an ask grant; only [Redecide],
//     called after the owner approved, turns an ask into a Decision, and
//     it decides again against the grants and taint of that moment; and
//     [DecideAllowing] (rule 10, allowance.go), for a call inside the
//     exact scope of a session allowance the owner made with an earlier
//     approval, under the same grants and no higher taint.
//   - [ListTools] (mcp.go) is the one Decision no grant makes: the
//     owner's listing of a declared MCP server for bxctl mcp pin, asked
//     on admin.sock, with no network, no mount and no secret (for a remote
//     server: its host alone, through an egress proxy, and its
//     declaration's secret as the bearer token), under which the toolkit
//     lists the server's tools and calls none.
//
// # Rules
//
//  1. The memory tools (recall, ask_memory, memory) are auto by a rule
//     here; grants cannot name them, and an invalid grant set does not stop
//     them (the newer decision: no grant file can change their policy).
//     Their results are labelled by memoryd; the Decision's class and
//     untrusted flag are the floor (private, trusted) joined with those.
//  2. An invalid grant set (nil, or not made by package grant) denies
//     every other call: grants_invalid.
//  3. call_tool is never the tool decided: its target, {"name",
//     "arguments"}, is, and every record names the target.
//  4. Arguments are parsed strictly by package toolargs before any grant
//     is looked at; a refusal is invalid_arguments with a one-line reason.
//  5. A grant applies to a call when it names the tool, it has not expired
//     (it matches strictly before its expiry instant), the session's taint
//     is at most its max_taint, and its constraint matches. Paths are
//     compared by whole elements on clean absolute paths. read_file: the
//     path is a grant path or lies under one. write_file: the path lies
//     strictly under a grant path; a grant path equal to the argument does
//     not count, because the file is written through its directory, which
//     is what is mounted, and a grant names a directory to write in, never
//     a file or directory to replace. A deny grant is the exception: it
//     also matches its own path, so that denying a file denies writing it. shell: the workdir is a grant path or lies under
//     one (the grant covers it), or a grant path lies under the workdir
//     (the mount would expose it, so that grant's mode, class and flags
//     apply too, but it cannot allow the call alone). http_fetch: the
//     URL's host is one of the grant's hosts, exactly.
//  6. No applicable grant means deny (no_grant). Among applicable grants
//     the most restrictive mode wins (deny, ask, auto). The winning grant
//     (named in records, and the only one whose secret the call gets) is
//     chosen among the grants that cover the call, or among the deny
//     grants if the mode is deny: the most restrictive mode among them,
//     then the longest covering path, then the smallest id. A shell call
//     that no grant covers is no_grant unless one denies it. A standing
//     grant (package grant, standing.go: read_file of one exact file, or
//     http_fetch of one host, mode auto) that applies turns an outcome of
//     ask into auto and is then the winner; it never changes a deny.
//  7. A result's class is the highest result_class of every applicable
//     grant, and it is untrusted if any says so. A shell mount is writable
//     only if every applicable grant is writable.
//  8. An invalid session taint is read as secret, untrusted and holding
//     recalled memory; a taint below private is read as private (no
//     session is public).
//  9. consult (consult.go) is decided against the endpoint brokerd's
//     config names: refused without one, refused in a secret session
//     whatever the grants say, and otherwise allowed only by an active
//     consult grant that names the endpoint's host, whose max_taint is at
//     least the session's taint, that, for an untrusted session, says
//     untrusted_sessions = true, and that lets the session's memory text
//     out: every session holds the identity files (its prompt does, and
//     brokerd cannot see a prompt), so the grant must say memory =
//     "identity_may_leave" or "all_may_leave", and all_may_leave once the
//     session has been handed recalled memory; each refusal names its
//     rule. Its result is always untrusted.
//  10. A session allowance (allowance.go) turns an ask into allowed for a
//     call inside its exact scope, and nothing else; it never decides a
//     consult, and lapses when a grant it rode on changes or the session
//     is more tainted than when it was made.
//  11. An MCP tool (mcp.SERVER.TOOL, mcp.go) is decided by the grants
//     that name it exactly, as rules 5 to 7 decide a built-in tool, with
//     no constraint on its arguments (they are the server's): the winning
//     grant's paths are its mounts and its hosts its only network. An
//     allowed or asked call is then refused (mcp_unpinned) unless the
//     server is declared, pinned for its image and its pin lists the
//     tool; the Decision carries the declaration and the pinned sums. Its
//     secret is the declaration's. A remote server's call is then refused
//     (no_grant, its detail naming the host) unless the winning grant's
//     hosts name the server's URL's host, and its hosts are that one
//     (and it mounts none of the grant's paths); its result is then
//     untrusted whatever the grant says.
//  12. read_attachment (attachment.go) is matched as read_file on the
//     path its id resolves to in the session's own attachments
//     directory; its result is always untrusted and at least of the
//     session's class.
//  13. post_file (postfile.go) is matched as read_file, and refused in a
//     session above the chat's class (private) whatever the grants say.
//
// What a Decision grants: read_file mounts the file read-only; write_file
// mounts the file's directory read-write (the toolkit writes only the
// file); shell mounts its workdir; http_fetch reaches the URL's host and no
// other (a redirect elsewhere needs its own call).
package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/pkg/text/escape"
	"wntrmute.dev/boxmaker/pkg/text/truncate"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/tool/grant"
	"wntrmute.dev/boxmaker/pkg/tool/mcpserver"
	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// Request is one tool call as loopd sent it.
type Request struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	// Endpoint is brokerd's [consult] table, which a consult call is
	// decided against (rule 9); brokerd sets it, never loopd. nil: no
	// consult is configured.
	Endpoint *Endpoint `json:"-"`
	// MCP is the owner's declared MCP servers and their pins, which an
	// MCP tool's call is checked against (rule 11); brokerd sets it,
	// never loopd. nil: none could be loaded, and every MCP call is
	// refused.
	MCP *mcpserver.Catalog `json:"-"`
	// Attachments is the session's own directory of posted files
	// (attachments/<session>, absolute), which a read_attachment's id is
	// resolved in (attachment.go); brokerd sets it, never loopd. Empty:
	// no file can be read.
	Attachments string `json:"-"`
}

// Session is a session's state as brokerd tracks it.
type Session struct {
	Taint     dataclass.Class `json:"taint"`
	Untrusted bool            `json:"untrusted"`
	// Recalled: the session has been handed recalled memory (a result of
	// recall or ask_memory). Identity text needs no flag: every session's
	// prompt holds it (rule 9).
	Recalled bool `json:"recalled"`
}

// effective applies rule 8.
func effective(s Session) Session {
	if !s.Taint.Valid() {
		return Session{Taint: dataclass.Secret, Untrusted: true, Recalled: true}
	}
	return Session{Taint: dataclass.Taint(s.Taint), Untrusted: s.Untrusted, Recalled: s.Recalled}
}

// Decide decides a request. Exactly one result is set: a valid Decision
// (the winning mode is auto, or the tool is a memory tool), an Ask (the
// winning mode is ask: the owner must approve, then call [Redecide]) or a
// Denial.
func Decide(gs *grant.Set, req Request, s Session, now time.Time) (Decision, *Ask, *Denial) {
	v, d := evaluate(gs, req, s, now)
	switch {
	case d != nil:
		return Decision{}, nil, d
	case v.mode == grant.Ask:
		return Decision{}, v.ask(req), nil
	}
	return Decision{&decision{verdict: *v}}, nil, nil
}

// Redecide decides a request again after the owner approved it, against
// the grants and session state of now: it returns a Decision if the
// outcome is still ask or auto, and the Denial otherwise (a deny grant
// added meanwhile, the grant expired, the taint rose above its max_taint).
func Redecide(gs *grant.Set, req Request, s Session, now time.Time) (Decision, *Denial) {
	v, d := evaluate(gs, req, s, now)
	if d != nil {
		return Decision{}, d
	}
	return Decision{&decision{verdict: *v, approved: true}}, nil
}

// callTool is call_tool's arguments.
type callTool struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// unwrap applies rule 3: it returns the tool to decide and its arguments.
func unwrap(req Request) (tool string, raw []byte, via bool, err error) {
	if req.Tool != toolset.CallTool {
		return req.Tool, req.Arguments, false, nil
	}
	var c callTool
	if err := strict.Unmarshal(req.Arguments, &c); err != nil {
		return req.Tool, nil, false, err
	}
	switch {
	case c.Name == toolset.CallTool:
		return req.Tool, nil, false, errors.New("call_tool cannot call call_tool")
	case c.Name == "":
		return req.Tool, nil, false, errors.New("name: empty")
	case !isObject(c.Arguments):
		return c.Name, nil, true, errors.New("arguments: want an object")
	}
	return c.Name, c.Arguments, true, nil
}

func isObject(raw []byte) bool {
	s := strings.TrimLeft(string(raw), " \t\r\n")
	return strings.HasPrefix(s, "{")
}

// evaluate applies the rules, returning what Decide and Redecide share.
func evaluate(gs *grant.Set, req Request, s Session, now time.Time) (*verdict, *Denial) {
	sess := effective(s)
	tool, raw, via, err := unwrap(req)
	deny := func(r Reason, detail string) *Denial {
		return &Denial{Reason: r, Tool: tool, ViaCallTool: via, Detail: detail, Session: sess, At: now}
	}
	if err != nil {
		return nil, deny(InvalidArguments, oneLine(tool+": "+err.Error()))
	}
	if toolset.IsMemory(tool) {
		args, err := toolargs.Parse(tool, raw)
		if err != nil {
			return nil, deny(InvalidArguments, oneLine(err.Error()))
		}
		return &verdict{tool: tool, via: via, args: args, mode: grant.Auto, builtin: true,
			class: dataclass.Private, session: sess, at: now}, nil
	}
	if !gs.Valid() {
		return nil, deny(GrantsInvalid, "")
	}
	if !toolset.IsGranted(tool) && !toolset.IsMCP(tool) {
		return nil, deny(UnknownTool, "")
	}
	args, err := toolargs.Parse(tool, raw)
	if err != nil {
		return nil, deny(InvalidArguments, oneLine(err.Error()))
	}
	if d := abovePost(tool, sess); d != nil {
		d.Tool, d.ViaCallTool, d.Session, d.At, d.Target = tool, via, sess, now, target(args)
		return nil, d
	}
	var (
		v *verdict
		d *Denial
	)
	switch a := args.(type) {
	case toolargs.Consult:
		v, d = matchConsult(gs.Grants(), a, req.Endpoint, sess, now)
	case toolargs.MCP:
		v, d = matchMCP(gs.Grants(), a, req.MCP, sess, now)
	case toolargs.ReadAttachment:
		call, err := resolveAttachment(a, req.Attachments)
		if err != nil {
			return nil, deny(NoGrant, "no attachments directory: "+oneLine(err.Error()))
		}
		if v, d = match(gs.Grants(), call, sess, now); v != nil {
			labelAttachment(v, sess)
		}
	default:
		v, d = match(gs.Grants(), args, sess, now)
	}
	if d == nil {
		d = postAboveChat(tool, v, sess)
	}
	if d != nil {
		d.Tool, d.ViaCallTool, d.Session, d.At, d.Target = tool, via, sess, now, target(args)
		return nil, d
	}
	v.tool, v.via, v.args, v.session, v.at = tool, via, args, sess, now
	return v, nil
}

// MaxDetail caps an invalid-arguments reason, which goes back to the model.
const MaxDetail = 300

// oneLine makes s one line of at most MaxDetail bytes, with control and
// format characters (such as U+202E, which reverses text) escaped.
func oneLine(s string) string {
	return truncate.Ellipsis(escape.Line(strings.Join(strings.Fields(s), " ")), MaxDetail)
}

// target is what a call is decided on, for records and messages.
func target(a toolargs.Args) string {
	switch a := a.(type) {
	case toolargs.ReadFile:
		return a.Path.String()
	case toolargs.WriteFile:
		return a.Path.String()
	case toolargs.Shell:
		return a.Workdir.String()
	case toolargs.HTTPFetch:
		return a.URL.String()
	case toolargs.Consult:
		return "consult"
	case toolargs.MCP:
		return a.Name
	case toolargs.ReadAttachment:
		return "attachment " + a.ID
	case toolargs.PostFile:
		return a.Path.String()
	}
	return ""
}
