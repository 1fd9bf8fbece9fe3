package server

import (
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// TestImageNotice: a message with images gets one line naming them and
// why the model did not see them; one without gets none.
func TestImageNotice(t *testing.T) {
	files := []wire.FileRef{{ID: strings.Repeat("a", 26), Name: "notes.txt", Type: "text/plain"},
		{ID: strings.Repeat("b", 26), Name: "shot\n.png", Type: "image/png"}}
	blind := (&Manager{}).imageNotice(files)
	if !strings.Contains(blind, `"shot\n.png"`) || !strings.Contains(blind, "cannot see images") || strings.Contains(blind, "notes.txt") ||
		strings.Count(blind, "\n") != 0 || !strings.HasSuffix(blind, "see docs/runbook.md#model-cannot-see") {
		t.Errorf("blind notice = %q", blind)
	}
	if seeing := (&Manager{Vision: true}).imageNotice(files); !strings.Contains(seeing, "does not yet hand images") {
		t.Errorf("vision notice = %q", seeing)
	}
	if n := (&Manager{}).imageNotice(files[:1]); n != "" {
		t.Errorf("notice without images = %q", n)
	}
}
