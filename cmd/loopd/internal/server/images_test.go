package server

import (
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// TestImageNotice: a message with images, for a model that cannot see,
// gets one line naming them and why; one without images, or for a
// model that can see, gets none.
func TestImageNotice(t *testing.T) {
	files := []wire.FileRef{{ID: strings.Repeat("a", 26), Name: "notes.txt", Type: "text/plain"},
		{ID: strings.Repeat("b", 26), Name: "shot\n.png", Type: "image/png"}}
	blind := (&Manager{}).imageNotice(files)
	if !strings.Contains(blind, `"shot\n.png"`) || !strings.Contains(blind, "it cannot see images") || strings.Contains(blind, "notes.txt") ||
		strings.Count(blind, "\n") != 0 || !strings.HasSuffix(blind, "see docs/runbook.md#model-cannot-see") {
		t.Errorf("blind notice = %q", blind)
	}
	if seeing := (&Manager{Vision: true}).imageNotice(files); seeing != "" {
		t.Errorf("a model that can see: notice %q", seeing)
	}
	if n := (&Manager{}).imageNotice(files[:1]); n != "" {
		t.Errorf("notice without images = %q", n)
	}
}
