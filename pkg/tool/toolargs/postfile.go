package toolargs

import (
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// PostFile attaches the file at Path to the turn's answer in the chat.
//
//	post_file {"path": "/abs/file"}
type PostFile struct {
	Path Path
}

type postFileWire struct {
	Path string `json:"path"`
}

// Tool implements Args.
func (PostFile) Tool() string { return toolset.PostFile }

// MarshalJSON writes the wire form.
func (a PostFile) MarshalJSON() ([]byte, error) {
	return strict.Marshal(postFileWire{a.Path.String()})
}

func parsePostFile(raw []byte) (Args, error) {
	var w postFileWire
	if err := strict.Unmarshal(raw, &w); err != nil {
		return nil, err
	}
	p, err := ParsePath(w.Path)
	if err != nil {
		return nil, err
	}
	return PostFile{p}, nil
}
