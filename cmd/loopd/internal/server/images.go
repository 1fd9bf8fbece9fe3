package server

import (
	"fmt"
	"strconv"
	"strings"

	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// Images posted with a message (issue 29). The model gets every file's
// descriptor line (sessionlog.FileLine) and never an image part: loopd
// does not yet hand image bytes to llama-server, whether or not the
// model can see (docs/decisions.md, 2026-12-02). So that an image is
// never dropped silently, the owner is told, in one plain line per
// message, which images the model did not see and why.

// imageNotice is the owner's line for files' images, or "" if there are
// none.
func (m *Manager) imageNotice(files []wire.FileRef) string {
	var names []string
	for _, f := range files {
		if strings.HasPrefix(f.Type, "image/") {
			names = append(names, strconv.Quote(f.Name))
		}
	}
	if len(names) == 0 {
		return ""
	}
	why := "the model cannot see images (llama-server reports no vision: it was started without a vision projector, --mmproj)"
	if m.Vision {
		why = "Boxmaker does not yet hand images to a model, even one that can see"
	}
	return fmt.Sprintf("The model did not see %s: %s; it was told only the name, type and size; see docs/runbook.md#model-cannot-see", strings.Join(names, ", "), why)
}
