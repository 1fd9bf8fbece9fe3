package policy

import (
	"slices"
	"time"

	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/tool/grant"
	"wntrmute.dev/boxmaker/pkg/tool/hostrule"
	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
)

// Decision is the authority to run one tool call. Only [Decide] and
// [Redecide] make a valid one; the zero value, which is all code outside
// this package can write, is not valid, and the runner must refuse it
// ([Decision.Valid]). It has no exported fields and no decoder can fill
// it. Copies of a valid Decision are the same authority: pass it to the
// runner, never store it.
//
// Accessors on an invalid Decision return zero values.
type Decision struct {
	d *decision
}

type decision struct {
	verdict
	approved  bool
	allowance int64 // the session allowance that decided it (rule 10), or 0
}

var zeroDecision decision

func (d Decision) get() *decision {
	if d.d == nil {
		return &zeroDecision
	}
	return d.d
}

// Valid reports whether d was made by this package.
func (d Decision) Valid() bool { return d.d != nil }

// Tool is the tool to run: call_tool's target, never call_tool.
func (d Decision) Tool() string { return d.get().tool }

// ViaCallTool reports whether the model called the tool through call_tool.
func (d Decision) ViaCallTool() bool { return d.get().via }

// Args are the parsed arguments; their type is the tool's, from package
// toolargs (toolargs.ReadFile for read_file, ...; toolargs.Memory for
// the memory tools).
func (d Decision) Args() toolargs.Args {
	if m, ok := d.get().args.(toolargs.Memory); ok {
		m.Raw = slices.Clone(m.Raw) // with MCP, the argument types that hold a slice
		return m
	}
	if m, ok := d.get().args.(toolargs.MCP); ok {
		m.Raw = slices.Clone(m.Raw)
		return m
	}
	return d.get().args
}

// Mode is the winning grant's mode: auto, or ask for a call the owner
// approved. A memory tool's is auto.
func (d Decision) Mode() grant.Mode { return d.get().mode }

// Approved reports whether the Decision came from [Redecide].
func (d Decision) Approved() bool { return d.get().approved }

// Builtin reports whether the tool is a memory tool, decided by the rule
// built in here; its Grant and Matched are empty, and memoryd's labels on
// its result are joined with Class and Untrusted.
func (d Decision) Builtin() bool { return d.get().builtin }

// Grant is the winning grant.
func (d Decision) Grant() GrantRef { return d.get().winner }

// Matched are every applicable grant, sorted by id; Class and Untrusted
// combine them all.
func (d Decision) Matched() []GrantRef { return slices.Clone(d.get().matched) }

// Class is the data class of the call's result.
func (d Decision) Class() dataclass.Class { return d.get().class }

// Untrusted reports whether the call's result is untrusted.
func (d Decision) Untrusted() bool { return d.get().untrusted }

// Label is the call's result's label: [Decision.Class] and
// [Decision.Untrusted] as one.
func (d Decision) Label() dataclass.Label {
	return dataclass.Label{Class: d.Class(), Untrusted: d.Untrusted()}
}

// Mounts are the paths to mount into the tool's container, each at the
// same path. Nothing else may be mounted.
func (d Decision) Mounts() []Mount { return slices.Clone(d.get().mounts) }

// Hosts are the only hosts the call's egress proxy may connect to; none
// means no network.
func (d Decision) Hosts() []hostrule.Name { return slices.Clone(d.get().hosts) }

// Secret is the name of the one secret the call's container gets (the
// winning grant's), and "" for none. brokerd's config says where its
// value lives.
func (d Decision) Secret() string { return d.get().secret }

// Session is the session state the call was decided under.
func (d Decision) Session() Session { return d.get().session }

// At is the time the call was decided at.
func (d Decision) At() time.Time { return d.get().at }

// Record is the Decision's summary for the audit log.
func (d Decision) Record() Record {
	if !d.Valid() {
		return Record{Outcome: "invalid", Session: effective(Session{})}
	}
	r := d.d.record("allowed")
	r.Approved = d.d.approved
	return r
}

// Mount is one path mounted into a tool's container at the same path.
type Mount struct {
	Path     toolargs.Path `json:"path"`
	Writable bool          `json:"writable"`
}

// GrantRef names a grant in records and messages.
type GrantRef struct {
	ID     string `json:"id"`
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
}

// Ask is a call that waits for the owner: the winning grant's mode is
// ask. It is not authority; once the owner approves, brokerd calls
// [Redecide] with Request.
type Ask struct {
	Request     Request // as received, to re-decide
	Tool        string  // call_tool's target, never call_tool
	ViaCallTool bool
	Args        toolargs.Args // what the owner approves, serialised again for display
	Grant       GrantRef      // the winning ask grant
	Matched     []GrantRef
	Class       dataclass.Class
	Untrusted   bool
	Mounts      []Mount
	Hosts       []hostrule.Name
	Secret      string // the secret the call's container would get
	// Consult is a consult's outbound request in full, for the owner
	// to read before it leaves (nil for other tools).
	Consult *ConsultCall
	Session Session
	At      time.Time
}

func (v *verdict) ask(req Request) *Ask {
	return &Ask{Request: req, Tool: v.tool, ViaCallTool: v.via, Args: v.args, Grant: v.winner,
		Matched: slices.Clone(v.matched), Class: v.class, Untrusted: v.untrusted,
		Mounts: slices.Clone(v.mounts), Hosts: slices.Clone(v.hosts), Secret: v.secret, Consult: v.consult, Session: v.session, At: v.at}
}

// Record is the Ask's summary for the audit log.
func (a *Ask) Record() Record {
	v := verdict{tool: a.Tool, via: a.ViaCallTool, args: a.Args, mode: grant.Ask, winner: a.Grant,
		matched: a.Matched, class: a.Class, untrusted: a.Untrusted, mounts: a.Mounts, hosts: a.Hosts, secret: a.Secret,
		session: a.Session, at: a.At}
	return v.record("ask")
}
