package policy

import (
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// TestReadAttachment: the id resolves in the session's own directory and
// is matched as read_file is on that path; a grant on the attachments
// directory covers every session, one on another session's covers
// nothing here; the result is untrusted and at least of the session's
// class whatever the grant says; a path-like id and a missing directory
// are refused.
func TestReadAttachment(t *testing.T) {
	id := strings.Repeat("a", 26)
	call := func(dir string, args map[string]any) Request {
		r := req(toolset.CallTool, map[string]any{"name": toolset.ReadAttachment, "arguments": args})
		r.Attachments = dir
		return r
	}
	all := set(t, g("att", toolset.ReadAttachment, "auto", "paths", `["/state/attachments"]`, "result_class", `"private"`))
	d, ask, den := Decide(all, call("/state/attachments/mm-one", map[string]any{"id": id, "offset": 10}), secret, now)
	if den != nil || ask != nil {
		t.Fatalf("Decide = %v %v", ask, den)
	}
	a, ok := d.Attachment()
	if !ok || a.Path.String() != "/state/attachments/mm-one/"+id || a.Offset != 10 || a.Length != 16<<10 {
		t.Errorf("Attachment() = %+v %v", a, ok)
	}
	if !d.Untrusted() || d.Class() != dataclass.Secret {
		t.Errorf("class %v untrusted %v; want secret (the session's), untrusted", d.Class(), d.Untrusted())
	}
	if d, _, _ := Decide(all, call("/state/attachments/mm-one", map[string]any{"id": id}), private, now); d.Class() != dataclass.Private || !d.Untrusted() {
		t.Errorf("private session: class %v untrusted %v", d.Class(), d.Untrusted())
	}
	other := set(t, g("att", toolset.ReadAttachment, "auto", "paths", `["/state/attachments/mm-two"]`))
	if _, _, den := Decide(other, call("/state/attachments/mm-one", map[string]any{"id": id}), private, now); den == nil || den.Reason != NoGrant {
		t.Errorf("another session's grant allowed the read: %v", den)
	}
	for _, bad := range []map[string]any{{"id": "../mm-two/" + id}, {"id": id, "length": 1 << 20}, {"id": id, "offset": -1}, {"path": "/etc/passwd"}} {
		if _, _, den := Decide(all, call("/state/attachments/mm-one", bad), private, now); den == nil || den.Reason != InvalidArguments {
			t.Errorf("%v: %v, want invalid_arguments", bad, den)
		}
	}
	if _, _, den := Decide(all, call("", map[string]any{"id": id}), private, now); den == nil {
		t.Error("a read without an attachments directory was allowed")
	}
	// read_file grants never cover read_attachment, nor the reverse.
	rf := set(t, g("rf", toolset.ReadFile, "auto", "paths", `["/state/attachments"]`))
	if _, _, den := Decide(rf, call("/state/attachments/mm-one", map[string]any{"id": id}), private, now); den == nil {
		t.Error("a read_file grant allowed read_attachment")
	}
}

// TestPostFile: post_file is matched as read_file on its path; a path
// outside the grant is no_grant; a secret session is refused whatever
// the grants say, naming the rule and its runbook entry.
func TestPostFile(t *testing.T) {
	gs := set(t, g("out", toolset.PostFile, "auto", "paths", `["/home/owner/out"]`))
	post := func(p string) Request {
		return req(toolset.CallTool, map[string]any{"name": toolset.PostFile, "arguments": map[string]any{"path": p}})
	}
	d, _, den := Decide(gs, post("/home/owner/out/report.csv"), private, now)
	if den != nil {
		t.Fatalf("Decide = %v", den)
	}
	if p, ok := d.PostFile(); !ok || p.String() != "/home/owner/out/report.csv" {
		t.Errorf("PostFile() = %v %v", p, ok)
	}
	if _, _, den := Decide(gs, post("/home/owner/secrets/key"), private, now); den == nil || den.Reason != NoGrant {
		t.Errorf("outside the grant: %v", den)
	}
	_, _, den = Decide(gs, post("/home/owner/out/report.csv"), secret, now)
	if den == nil || !strings.Contains(den.Error(), "holds secret data and the chat is private") || !strings.Contains(den.Error(), "docs/runbook.md#post-file-refused") {
		t.Errorf("secret session: %v", den)
	}
	if _, ok := (Decision{}).PostFile(); ok {
		t.Error("the zero Decision allows a post")
	}
	// A grant that labels the files secret: a private session does not
	// post one either (its taint would rise only after the file was out).
	tax := set(t, g("tax", toolset.PostFile, "auto", "paths", `["/home/owner/tax"]`, "result_class", `"secret"`))
	_, _, den = Decide(tax, post("/home/owner/tax/return.pdf"), private, now)
	if den == nil || !strings.Contains(den.Error(), "labels the file secret and the chat is private") || !strings.Contains(den.Error(), "docs/runbook.md#post-file-refused") {
		t.Errorf("a secret-labelled file from a private session: %v", den)
	}
}
