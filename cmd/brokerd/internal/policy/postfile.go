package policy

import (
	"fmt"

	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// post_file (issue 29) attaches a file to the turn's answer in the
// owner's chat. It is matched as read_file is (the path is a grant path
// or under one), and one more rule holds whatever the grants say: the
// chat is of class private (the owner's own threads and the channels
// gatewayd.toml allows, docs/decisions.md 2026-12-02), so a session
// above private, a secret one, never posts a file there. Its result (a
// note that the file will be attached) is the session's own class and
// trusted: it holds nothing the file held.

// ChatClass is the class of what may be posted in the chat.
const ChatClass = dataclass.Private

// PostFile is the file a post_file Decision allows to attach; false for
// any other Decision.
func (d Decision) PostFile() (toolargs.Path, bool) {
	a, ok := d.get().args.(toolargs.PostFile)
	if !ok {
		return toolargs.Path{}, false
	}
	return a.Path, true
}

// abovePost is the denial of a post_file from a session above the
// chat's class, or nil.
func abovePost(tool string, sess Session) *Denial {
	if tool != toolset.PostFile || sess.Taint.AtMost(ChatClass) {
		return nil
	}
	return &Denial{Reason: NoGrant, Detail: fmt.Sprintf("post_file: this session holds %s data and the chat is %s: no file is posted from it, whatever the grants say", sess.Taint, ChatClass)}
}

// postAboveChat is the denial of a post_file whose winning grant labels
// the file above the chat's class (its result_class: a file the owner
// marked secret is secret whatever the session held before), or nil.
// Taint rises only after a call, so the session's class alone would let
// a private session post a secret file.
func postAboveChat(tool string, v *verdict, sess Session) *Denial {
	if tool != toolset.PostFile || v == nil {
		return nil
	}
	if c := dataclass.Join(sess.Taint, v.class); !c.AtMost(ChatClass) {
		return &Denial{Reason: NoGrant, Detail: fmt.Sprintf("post_file: grant %s labels the file %s and the chat is %s: no file above the chat's class is posted, whatever the grants say", v.winner.ID, v.class, ChatClass)}
	}
	return nil
}

// postFileError is a post_file's refusal by the rule above, for the
// owner and the model.
func postFileError(d *Denial) (string, bool) {
	if d.Tool != toolset.PostFile || d.Reason != NoGrant || d.Detail == "" {
		return "", false
	}
	return fmt.Sprintf("%q on %q denied: %s; see docs/runbook.md#post-file-refused", d.Tool, d.Target, d.Detail), true
}
