// Package toolset is the one list of Boxmaker's tools: each tool's name,
// its class (where it runs and what decides it) and whether it is in the
// model's fixed tools array. loopd builds its tools array and routes calls
// from it, brokerd's policy and the grant checker judge names by it, memoryd
// serves its memory tools, and the toolkit runs only its granted tools.
//
// Invariant: [All] is the only list of tool names in the product; an
// architecture rule (checks/arch ToolLists) refuses a declaration outside
// this package that spells two tool names. The package depends on nothing
// beyond the standard library, so that loopd, which must never link the
// secret store, shares the list with the toolkit and brokerd.
package toolset

import "slices"

// The tools' names.
const (
	Clock     = "clock"
	FindTool  = "find_tool"
	CallTool  = "call_tool"
	ReadFile  = "read_file"
	WriteFile = "write_file"
	Shell     = "shell"
	HTTPFetch = "http_fetch"
	Consult   = "consult"
	Recall    = "recall"
	AskMemory = "ask_memory"
	Memory    = "memory"
)

// ReadAttachment reads a file the owner posted with a message (issue
// 29): granted, answered by brokerd itself from the attachments
// directory, never in a container or the prompt.
const ReadAttachment = "read_attachment"

// PostFile attaches a file to the turn's answer in the owner's chat
// (issue 29): granted (the paths that may be posted), carried out by
// brokerd (a copy into outbox/) and gatewayd (the upload).
const PostFile = "post_file"

// Class says where a tool runs and what decides a call to it.
type Class int

// The classes.
const (
	// ClassLocal tools run inside loopd and reach no other role: they
	// read nothing the owner has not put in the prompt.
	ClassLocal Class = iota + 1
	// ClassMeta is call_tool, through which the model calls a tool that
	// is not in its tools array. It is never decided itself: its target is.
	ClassMeta
	// ClassGranted tools are decided by the owner's grants and run in a
	// tool container (the toolkit), launched by brokerd's runner.
	ClassGranted
	// ClassMemory tools are decided by a rule built into brokerd and run
	// in memoryd.
	ClassMemory
)

// Tool is one entry of the list.
type Tool struct {
	Name  string
	Class Class
	// Core tools are in every epoch's tools array, in list order; the
	// others are reached through call_tool (granted tools) or not offered
	// to the model yet.
	Core bool
}

// All is every tool, in a fixed order: the core tools' order is the order
// of the tools array, and changing it changes every prompt.
//
// ask_memory is a memory tool (brokerd's built-in rule decides it and
// memoryd answers it through Honcho) but not a core tool: loopd adds it
// to the tools array only when its config says fleet memory is set up
// (loopd.toml's ask_memory), since without Honcho it can only answer
// that it is unavailable, and a tool the model can never use
// successfully does not belong in its prompt (docs/decisions.md).
var All = []Tool{
	{Clock, ClassLocal, true},
	{FindTool, ClassLocal, true},
	{CallTool, ClassMeta, true},
	{ReadFile, ClassGranted, false},
	{WriteFile, ClassGranted, false},
	{Shell, ClassGranted, false},
	{HTTPFetch, ClassGranted, false},
	{Consult, ClassGranted, false},
	{ReadAttachment, ClassGranted, false},
	{PostFile, ClassGranted, false},
	{Recall, ClassMemory, true},
	{AskMemory, ClassMemory, false},
	{Memory, ClassMemory, true},
}

// Lookup returns the tool named name.
func Lookup(name string) (Tool, bool) {
	i := slices.IndexFunc(All, func(t Tool) bool { return t.Name == name })
	if i < 0 {
		return Tool{}, false
	}
	return All[i], true
}

// Of lists the names of the tools of class c, in list order.
func Of(c Class) []string {
	var out []string
	for _, t := range All {
		if t.Class == c {
			out = append(out, t.Name)
		}
	}
	return out
}

// Core lists the names in every epoch's tools array, in order.
func Core() []string {
	var out []string
	for _, t := range All {
		if t.Core {
			out = append(out, t.Name)
		}
	}
	return out
}

// Names lists every tool's name, in list order.
func Names() []string {
	out := make([]string, len(All))
	for i, t := range All {
		out[i] = t.Name
	}
	return out
}

// IsGranted reports whether name is a tool grants decide.
func IsGranted(name string) bool { return is(name, ClassGranted) }

// IsMemory reports whether name is a memory tool.
func IsMemory(name string) bool { return is(name, ClassMemory) }

// IsCore reports whether name is in every epoch's tools array.
func IsCore(name string) bool {
	t, ok := Lookup(name)
	return ok && t.Core
}

func is(name string, c Class) bool {
	t, ok := Lookup(name)
	return ok && t.Class == c
}
