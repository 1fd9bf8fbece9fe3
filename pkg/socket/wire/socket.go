package wire

import (
	"slices"
	"time"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

// Socket is one socket between two roles, declared once, here, beside its
// messages: its file name, the messages each end reads, which answers come
// before the final one, its frame cap and its deadlines. Package rpc's one
// client call and one server loop take a *Socket and nothing else about
// the protocol, so a new socket is a new value, never a new copy of the
// exchange.
//
// Requests and Answers are unions, not lists: a server decodes with
// Requests, which for brokerd's and memoryd's sockets is the union of
// every sibling socket, so a message meant for a sibling decodes and is
// then refused as [Forbidden] (a message of no union is refused the same
// way). Which requests a socket takes is its server's routing table.
type Socket struct {
	Name     string                        // the socket's file name in its directory
	Server   string                        // the role that listens on it, for what a client says when it fails
	Requests *strict.Union[strict.Variant] // what the server reads (and a client writes)
	Answers  *strict.Union[strict.Variant] // what a client reads (and the server writes)
	// Interim are the answer tags that come before the final answer of
	// an exchange (loop.sock's turn events, broker.sock's tool_pending);
	// any other answer ends it.
	Interim  []string
	FrameMax int // each frame's cap, both ways; 0 for a socket that is not framed

	// OnePerConn: the server takes one request per connection (the
	// connection then holds that request's whole conversation).
	OnePerConn bool
	// Idle is the server's deadline on each read and write, the
	// listener's IdleTimeout; 0 is package sockets' default.
	Idle time.Duration
	// Wait is a client's deadline on one exchange, from dialling to the
	// final answer; 0 means only the caller's context bounds it (a turn
	// may wait a day for the owner).
	Wait time.Duration
}

// Final reports whether answer v ends an exchange on s.
func (s *Socket) Final(v strict.Variant) bool { return !slices.Contains(s.Interim, v.Tag()) }

// The sockets. Each names its directory's pair of roles in package
// layout; the table in docs/design.md#sockets says who connects.
var (
	// Loop is loopd's loop.sock, for gatewayd and bxctl: a [Send] is
	// answered with the turn's events until an [Answer], [Stopped] or
	// [*Error]; a [Stop] with one [StopDone]; an [AnswersSince] with
	// one [Answers]. A connection takes one
	// message after another.
	Loop = Socket{Name: "loop.sock", Server: "loopd", Requests: LoopRequests, Answers: LoopEvents,
		Interim:  []string{"accepted", "working", "reasoning", "tool_running", "approval_pending", "tool_denied"},
		FrameMax: LoopFrameMax,
		// A chat client may sit idle between messages for a while.
		Idle: time.Hour}

	// Broker is brokerd's broker.sock, for loopd: one [ToolRequest] per
	// connection, answered with [ToolPending] while the owner is asked
	// and [ConsultPending] once a consult is sent, then one [ToolResult]
	// or [*Error].
	Broker = Socket{Name: "broker.sock", Server: "brokerd", Requests: BrokerMessages, Answers: BrokerMessages,
		Interim: []string{"tool_pending", "consult_pending"}, FrameMax: BrokerFrameMax, OnePerConn: true,
		// A call may wait a day for the owner with nothing to read.
		Idle: 25 * time.Hour,
		// The first answer; a client extends it after tool_pending.
		Wait: 120 * time.Second}

	// Admin is brokerd's admin.sock, for bxctl: approvals and queries,
	// one answer each, several on a connection.
	Admin = Socket{Name: "admin.sock", Server: "brokerd", Requests: BrokerMessages, Answers: BrokerMessages,
		FrameMax: BrokerFrameMax, Wait: 30 * time.Second}

	// Gateway is gatewayd's gateway.sock, for brokerd's courier: one
	// pending approval per connection, open while it is pending. The
	// courier's [PostApproval] is answered with [ApprovalPosted]; later
	// gatewayd asks with [OwnerAnswer] and the courier answers
	// [Answered] (an exchange the other way round on the same
	// connection).
	Gateway = Socket{Name: "gateway.sock", Server: "gatewayd", Requests: GatewayMessages, Answers: GatewayMessages,
		FrameMax: GatewayFrameMax, OnePerConn: true, Idle: 25 * time.Hour}

	// Memory is memoryd's memory.sock, for loopd: one request per
	// connection, one answer.
	Memory = Socket{Name: "memory.sock", Server: "memoryd", Requests: MemorydMessages, Answers: MemorydMessages,
		FrameMax: MemoryFrameMax, OnePerConn: true, Idle: 5 * time.Minute, Wait: 10 * time.Second}

	// Memtool is memoryd's memtool.sock, for brokerd: one
	// [MemtoolCall] per connection, one answer.
	Memtool = Socket{Name: "memtool.sock", Server: "memoryd", Requests: MemorydMessages, Answers: MemtoolMessages,
		FrameMax: MemoryFrameMax, OnePerConn: true, Idle: 5 * time.Minute, Wait: 60 * time.Second}

	// Memadmin is memoryd's memadmin.sock, for bxctl: one request per
	// connection, one answer; a reindex reads every session log.
	Memadmin = Socket{Name: "memadmin.sock", Server: "memoryd", Requests: MemorydMessages, Answers: MemorydMessages,
		FrameMax: MemoryFrameMax, OnePerConn: true, Idle: 5 * time.Minute, Wait: 5 * time.Minute}

	// Memchat is memoryd's memchat.sock, for gatewayd: the owner's
	// `!why` and `!forget` from the chat (memchat.go), one request per
	// connection, one answer.
	Memchat = Socket{Name: "memchat.sock", Server: "memoryd", Requests: MemorydMessages, Answers: MemorydMessages,
		FrameMax: MemoryFrameMax, OnePerConn: true, Idle: time.Minute, Wait: 30 * time.Second}

	// Gate is brokerd's gate.sock, for memoryd: one [SessionQuery] per
	// connection, answered with one [SessionState]. It answers nothing
	// else (the clean-turn gate, P23): memoryd asks when a turn has
	// ended, and a late answer files the turn untrusted, so the wait is
	// short.
	Gate = Socket{Name: "gate.sock", Server: "brokerd", Requests: BrokerMessages, Answers: BrokerMessages,
		FrameMax: GateFrameMax, OnePerConn: true, Idle: 10 * time.Second, Wait: 5 * time.Second}

	// Infer is inferproxy's infer.sock, for loopd. It is not framed: it
	// carries llama-server's HTTP bytes, so only its name is here.
	Infer = Socket{Name: "infer.sock", Server: "inferproxy"}
)

// Sockets is every socket, for tests and for package layout.
var Sockets = []*Socket{&Loop, &Broker, &Admin, &Gateway, &Memory, &Memtool, &Memadmin, &Memchat, &Gate, &Infer}
