// Package toolargs is the vocabulary of tool calls that brokerd decides
// and the toolkit executes: the arguments each tool takes, and the path and URL types those arguments are made of. brokerd
// parses a request's arguments with [Parse] before matching grants, and
// the toolkit parses the same JSON with the same function, so the two
// cannot read one call two ways.
//
// Invariant: [Parse] returns an [Args] only for arguments that decoded
// strictly (package strict: no unknown, case-differing, duplicate or
// missing keys) and whose every path is a clean absolute [Path] and every
// URL a [URL] on a [hostrule.Name]; nothing is cleaned or repaired, so
// what is approved is what the model wrote. The argument structs hold
// parsed values, and their MarshalJSON writes the wire form back.
//
// The tools and their arguments (all fields required):
//
//	read_file   {"path": "/abs/file"}
//	write_file  {"path": "/abs/dir/file", "content": "text"}
//	shell       {"command": "sh -c text", "workdir": "/abs/dir"}
//	http_fetch  {"url": "https://host.example/path"}
//	consult     {"question": "text", "context": "text"}   (context optional)
//	read_attachment {"id": "file id", "offset": 0, "length": 16384}   (offset, length optional; attachment.go)
//	post_file   {"path": "/abs/file"}   (postfile.go)
//
// consult's container does not get those arguments: it gets the request
// brokerd built and logged from them ([ConsultCall], consult.go), so
// the bytes the remote model receives are the bytes the log holds.
//
// The tools' names and classes are package toolset's one list. In a tool
// container the arguments arrive inside package toolinput's envelope,
// with the one secret the grant injects, if any; this package holds no
// secret, so any role may link it.
//
// The memory tools (toolset.ClassMemory) are decided by a rule built into
// brokerd and run in memoryd: [Parse] requires their arguments only to be
// one JSON object ([Memory]), and memoryd parses them with this package's
// [ParseRecall], [ParseMemoryEdit] and [ParseAskMemory] (memory.go).
package toolargs

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// MaxCommandLen caps a shell command.
const MaxCommandLen = 64 << 10

// Args is the parsed arguments of one tool call.
type Args interface {
	// Tool names the tool these arguments are for.
	Tool() string
	// MarshalJSON writes the arguments in their wire form.
	MarshalJSON() ([]byte, error)
}

// ReadFile reads one file.
type ReadFile struct {
	Path Path
}

// WriteFile writes Content to the file at Path, creating or replacing it.
type WriteFile struct {
	Path    Path
	Content string
}

// Shell runs Command with sh -c in Workdir.
type Shell struct {
	Command string
	Workdir Path
}

// HTTPFetch fetches URL.
type HTTPFetch struct {
	URL URL
}

// Memory is a memory tool's call: its name and its arguments, one JSON
// object with no duplicate keys, checked further by memoryd.
type Memory struct {
	Name string
	Raw  json.RawMessage
}

// Tool implementations.
func (ReadFile) Tool() string  { return toolset.ReadFile }
func (WriteFile) Tool() string { return toolset.WriteFile }
func (Shell) Tool() string     { return toolset.Shell }
func (HTTPFetch) Tool() string { return toolset.HTTPFetch }
func (m Memory) Tool() string  { return m.Name }

// The wire forms, decoded strictly.
type (
	readFileWire struct {
		Path string `json:"path"`
	}
	writeFileWire struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	shellWire struct {
		Command string `json:"command"`
		Workdir string `json:"workdir"`
	}
	httpFetchWire struct {
		URL string `json:"url"`
	}
)

// MarshalJSON implementations write the wire form.
func (a ReadFile) MarshalJSON() ([]byte, error) {
	return strict.Marshal(readFileWire{a.Path.String()})
}
func (a WriteFile) MarshalJSON() ([]byte, error) {
	return strict.Marshal(writeFileWire{a.Path.String(), a.Content})
}
func (a Shell) MarshalJSON() ([]byte, error) {
	return strict.Marshal(shellWire{a.Command, a.Workdir.String()})
}
func (a HTTPFetch) MarshalJSON() ([]byte, error) {
	return strict.Marshal(httpFetchWire{a.URL.String()})
}
func (m Memory) MarshalJSON() ([]byte, error) {
	if len(m.Raw) == 0 {
		return nil, errors.New("marshal memory arguments: empty")
	}
	return slices.Clone(m.Raw), nil
}

// ErrUnknownTool is returned by [Parse] for a name that is neither a
// granted tool nor a memory tool.
var ErrUnknownTool = errors.New("unknown tool")

// Parse decodes the arguments of a call to tool. Its errors are one line,
// written for the model to correct its call.
func Parse(tool string, raw []byte) (Args, error) {
	switch tool {
	case toolset.ReadFile:
		var w readFileWire
		if err := strict.Unmarshal(raw, &w); err != nil {
			return nil, err
		}
		p, err := ParsePath(w.Path)
		if err != nil {
			return nil, err
		}
		return ReadFile{p}, nil
	case toolset.WriteFile:
		var w writeFileWire
		if err := strict.Unmarshal(raw, &w); err != nil {
			return nil, err
		}
		p, err := ParsePath(w.Path)
		if err != nil {
			return nil, err
		}
		return WriteFile{p, w.Content}, nil
	case toolset.Shell:
		var w shellWire
		if err := strict.Unmarshal(raw, &w); err != nil {
			return nil, err
		}
		if err := checkCommand(w.Command); err != nil {
			return nil, err
		}
		p, err := ParsePath(w.Workdir)
		if err != nil {
			return nil, fmt.Errorf("workdir: %w", err)
		}
		return Shell{w.Command, p}, nil
	case toolset.HTTPFetch:
		var w httpFetchWire
		if err := strict.Unmarshal(raw, &w); err != nil {
			return nil, err
		}
		u, err := ParseURL(w.URL)
		if err != nil {
			return nil, err
		}
		return HTTPFetch{u}, nil
	case toolset.Consult:
		return parseConsult(raw)
	case toolset.ReadAttachment:
		return parseReadAttachment(raw)
	case toolset.PostFile:
		return parsePostFile(raw)
	}
	if toolset.IsMCP(tool) {
		return parseMCP(tool, raw)
	}
	if toolset.IsMemory(tool) {
		var obj map[string]json.RawMessage
		if err := strict.Unmarshal(raw, &obj); err != nil {
			return nil, err
		}
		return Memory{tool, slices.Clone(json.RawMessage(raw))}, nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownTool, tool)
}

func checkCommand(c string) error {
	switch {
	case c == "":
		return errors.New("command: empty")
	case len(c) > MaxCommandLen:
		return fmt.Errorf("command: longer than %d bytes", MaxCommandLen)
	case slices.Contains([]byte(c), 0):
		return errors.New("command: contains a NUL byte")
	}
	return nil
}
