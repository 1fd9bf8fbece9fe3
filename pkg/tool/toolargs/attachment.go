package toolargs

import (
	"fmt"
	"regexp"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// ReadAttachment reads part of a file the owner posted with a message
// in this session (issue 29): the file's id as its descriptor gives it,
// and the byte range to read (offset 0 and the default length when
// absent). brokerd resolves the id to the session's own attachments
// directory; the model never names a path.
//
//	read_attachment {"id": "<26-character id>", "offset": 0, "length": 16384}
type ReadAttachment struct {
	ID     string
	Offset int64
	Length int64
}

// The range's bounds.
const (
	// DefaultAttachmentRead is what one read returns when it names no
	// length.
	DefaultAttachmentRead = 16 << 10
	// MaxAttachmentRead caps one read's length.
	MaxAttachmentRead = 64 << 10
	// maxAttachmentOffset is past any attachment gatewayd keeps.
	maxAttachmentOffset = 1 << 30
)

// attachmentID is a Mattermost file id: what names an attachment.
var attachmentID = regexp.MustCompile(`^[a-z0-9]{26}$`)

type readAttachmentWire struct {
	ID     string `json:"id"`
	Offset int64  `json:"offset,omitempty"`
	Length int64  `json:"length,omitempty"`
}

// Tool implements Args.
func (ReadAttachment) Tool() string { return toolset.ReadAttachment }

// MarshalJSON writes the wire form, offset and length always present.
func (a ReadAttachment) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf(`{"id":%q,"offset":%d,"length":%d}`, a.ID, a.Offset, a.Length)), nil
}

func parseReadAttachment(raw []byte) (Args, error) {
	var w readAttachmentWire
	if err := strict.Unmarshal(raw, &w); err != nil {
		return nil, err
	}
	switch {
	case !attachmentID.MatchString(w.ID):
		return nil, fmt.Errorf("id: want the 26-character id of an attached file, as its descriptor in the message gives it")
	case w.Offset < 0 || w.Offset > maxAttachmentOffset:
		return nil, fmt.Errorf("offset: want 0 to %d", maxAttachmentOffset)
	case w.Length < 0 || w.Length > MaxAttachmentRead:
		return nil, fmt.Errorf("length: want 1 to %d (0 or absent reads %d)", MaxAttachmentRead, DefaultAttachmentRead)
	}
	if w.Length == 0 {
		w.Length = DefaultAttachmentRead
	}
	return ReadAttachment(w), nil
}
