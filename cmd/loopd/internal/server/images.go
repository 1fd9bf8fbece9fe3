package server

import (
	"fmt"
	"strconv"
	"strings"

	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// Images posted with a message (issue 29). The model gets every file's
// descriptor line (sessionlog.FileLine); a model that can see also gets
// each image as an image part after the message's text (package turn,
// images.go). So that an image is never dropped silently, the owner of
// a model that cannot see is told, in one plain line per message, which
// images the model did not see and why.

// imageNotice is the owner's line for files' images, or "" if there are
// none.
func (m *Manager) imageNotice(files []wire.FileRef) string {
	var names []string
	for _, f := range files {
		if strings.HasPrefix(f.Type, "image/") {
			names = append(names, strconv.Quote(f.Name))
		}
	}
	if len(names) == 0 || m.Vision {
		return ""
	}
	return fmt.Sprintf("The model did not see %s: it cannot see images (llama-server reports no vision: it was started without a vision projector, --mmproj); it was told only the name, type and size; see docs/runbook.md#model-cannot-see", strings.Join(names, ", "))
}
