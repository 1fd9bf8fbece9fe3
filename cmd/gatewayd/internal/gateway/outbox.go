package gateway

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/render"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/truncate"
)

// Files out (issue 29). A post_file brokerd allowed put its copy in
// outbox/<session>/<id> (layout.Outbox, brokerd's, group gatewayd's);
// the turn's answer names them. gatewayd uploads each to the answer's
// channel and attaches them to the answer's last post. A file it cannot
// read or upload gets one line in the thread, and the answer is posted
// without it: never silently dropped.

// MaxOutFile caps a file gatewayd uploads (brokerd copies none larger).
const MaxOutFile = 10 << 20

// uploadPosted uploads the turn's posted files and returns their ids.
func (g *Gateway) uploadPosted(ctx context.Context, channel, root, session string, files []wire.PostedFile) []string {
	var ids, lines []string
	for i, f := range files {
		if i == wire.MaxFiles {
			break
		}
		name := render.Plain(f.Name)
		data, err := g.readOutbox(session, f)
		if err == nil {
			var id string
			if id, err = g.mm.UploadFile(ctx, channel, filepath.Base(f.Name), data); err == nil {
				ids = append(ids, id)
				g.log.Info("file posted", "session", session, "file", f.ID, "mattermost", id)
				continue
			}
		}
		g.log.Warn("file not posted", "session", session, "file", f.ID, "err", err.Error())
		lines = append(lines, fmt.Sprintf("The file %s could not be attached to the answer (%s); see docs/runbook.md#post-file-refused", name, render.Plain(truncate.Ellipsis(err.Error(), 200))))
	}
	if len(lines) > 0 {
		g.reply(ctx, channel, root, strings.Join(lines, "\n"))
	}
	return ids
}

// readOutbox reads one posted file: a regular file, not a link, within
// MaxOutFile, under the session's outbox directory.
func (g *Gateway) readOutbox(session string, f wire.PostedFile) ([]byte, error) {
	if wire.CheckSessionID(session) != nil || !wire.PostedIDPattern.MatchString(f.ID) || f.Name == "" || strings.ContainsAny(f.Name, "/\x00") {
		return nil, fmt.Errorf("loopd named a malformed file")
	}
	p := filepath.Join(layout.Outbox.In(g.cfg.StateDir), session, f.ID)
	fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("the outbox copy could not be opened: %v", err)
	}
	file := os.NewFile(uintptr(fd), p)
	defer file.Close()
	fi, err := file.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > MaxOutFile {
		return nil, fmt.Errorf("the outbox copy is not a regular file within %d bytes", MaxOutFile)
	}
	return io.ReadAll(io.LimitReader(file, MaxOutFile))
}
