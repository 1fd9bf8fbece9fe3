package policy

import (
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
)

// read_attachment (issue 29) reads a file the owner posted in this
// session. The model names the file by id; brokerd resolves it to the
// session's own directory under attachments/ ([Request.Attachments]),
// and that path is what grants are matched against, as read_file's: a
// grant path equal to it or above it covers it (rule 5). So a grant on
// the attachments directory covers every session's files, and nothing
// the model writes can reach another session's or any other path. Its
// result is always untrusted and at least of the session's class (a
// document is data from outside even when the owner sends it), whatever
// the grants say; brokerd reads the file itself, never in a container.

// attachmentCall is a read_attachment call with the path its id
// resolves to: what match sees.
type attachmentCall struct {
	toolargs.ReadAttachment
	path toolargs.Path
}

// AttachmentRead is what a read_attachment Decision allows: read Length
// bytes at Offset of the file at Path, and nothing else.
type AttachmentRead struct {
	Path   toolargs.Path
	Offset int64
	Length int64
}

// Attachment is the read a read_attachment Decision allows; false for
// any other Decision.
func (d Decision) Attachment() (AttachmentRead, bool) {
	a := d.get().attachment
	if a == nil {
		return AttachmentRead{}, false
	}
	return *a, true
}

// resolveAttachment makes the call match sees for a read_attachment, or
// the denial: without an attachments directory (brokerd's config names
// no state directory) no file can be read.
func resolveAttachment(a toolargs.ReadAttachment, dir string) (attachmentCall, error) {
	p, err := toolargs.ParsePath(dir + "/" + a.ID)
	if err != nil {
		return attachmentCall{}, err
	}
	return attachmentCall{ReadAttachment: a, path: p}, nil
}

// labelAttachment applies the rule above to a verdict: untrusted, and
// of the session's class at least.
func labelAttachment(v *verdict, sess Session) {
	v.untrusted = true
	v.class = dataclass.Join(v.class, sess.Taint)
}
