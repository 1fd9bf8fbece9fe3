package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/mattermost"
	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/pdftext"
	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/render"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/escape"
	"wntrmute.dev/boxmaker/pkg/text/truncate"
)

// Files posted with a heard message (issue 29). gatewayd fetches each
// from Mattermost's files API, sniffs its type from its first bytes
// (never the name's or the server's word), keeps a text file's text, a
// PDF's extracted text, or an image as it is, in the session's directory
// under attachments/ (attachstore.go: whole or not at all), and sends
// loopd a descriptor per file ([wire.FileRef]), never the content. A
// file over a cap, of a type it does not keep, or that cannot be fetched
// gets one line to the owner in the thread, and no descriptor.

// The caps (docs/decisions.md, 2026-12-02).
const (
	// MaxFileBytes caps one file as downloaded.
	MaxFileBytes = 10 << 20
	// MaxPostBytes caps all the files of one post, as downloaded.
	MaxPostBytes = 25 << 20
	// MaxTextBytes caps the text kept of one file (a text file's, or
	// what a PDF shows); read_attachment reads it in ranges.
	MaxTextBytes = 2 << 20
	// fetchWait bounds the fetching of one post's files.
	fetchWait = 2 * time.Minute
)

// fetched is what came of one post's files: the descriptors to send and
// the lines to tell the owner.
type fetched struct {
	files []wire.FileRef
	lines []string
}

// fetchFiles fetches post's files into session's attachments directory.
func (g *Gateway) fetchFiles(ctx context.Context, session string, post *mattermost.Post) fetched {
	var out fetched
	if len(post.FileIDs) == 0 {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, fetchWait)
	defer cancel()
	infos, err := g.mm.FileInfosForPost(ctx, post.ID)
	if err != nil {
		out.lines = append(out.lines, fmt.Sprintf("The %d file(s) of this message could not be listed by Mattermost (%s); none was read; see docs/runbook.md#gateway-file-unfetchable", len(post.FileIDs), render.Plain(truncate.Ellipsis(err.Error(), 200))))
		return out
	}
	var total int64
	for i, id := range post.FileIDs {
		if i == wire.MaxFiles {
			out.lines = append(out.lines, fmt.Sprintf("Only the first %d files of a message are read; the other %d were not; see docs/runbook.md#gateway-file-too-large", wire.MaxFiles, len(post.FileIDs)-wire.MaxFiles))
			break
		}
		ref, line := g.fetchFile(ctx, session, infos[id], id, &total)
		if line != "" {
			g.log.Warn("file not kept", "post", post.ID, "file", id, "why", line)
			out.lines = append(out.lines, line)
			continue
		}
		g.log.Info("file kept", "post", post.ID, "file", id, "type", ref.Type, "size", ref.Size)
		out.files = append(out.files, ref)
	}
	return out
}

// fetchFile fetches one file; it returns its descriptor, or the line for
// the owner. total counts the post's bytes downloaded so far.
// info is the server's info of the file, nil if the post's file list
// did not hold it.
func (g *Gateway) fetchFile(ctx context.Context, session string, info *mattermost.FileInfo, id string, total *int64) (wire.FileRef, string) {
	if info == nil || info.DeleteAt != 0 {
		return wire.FileRef{}, fmt.Sprintf("File %s is not attached to this message as the server tells it, so it was not read; see docs/runbook.md#gateway-file-unfetchable", render.Plain(escape.Line(id)))
	}
	name := fileName(info.Name, id)
	shown := render.Plain(escape.Line(name))
	switch {
	case info.Size > MaxFileBytes:
		return wire.FileRef{}, fmt.Sprintf("File %s is %d bytes, over Boxmaker's cap of %d per file; it was not read; see docs/runbook.md#gateway-file-too-large", shown, info.Size, MaxFileBytes)
	case *total+info.Size > MaxPostBytes:
		return wire.FileRef{}, fmt.Sprintf("File %s would take this message's files over Boxmaker's cap of %d bytes per message; it was not read; see docs/runbook.md#gateway-file-too-large", shown, MaxPostBytes)
	}
	// An image by the server's word goes where loopd reads images; its
	// content must then sniff as one (keep).
	image := strings.HasPrefix(info.MimeType, "image/")
	dir, err := g.attachments.sessionDir(session, image)
	if err != nil {
		g.log.Error("attachments directory", "session", session, "err", err.Error())
		return wire.FileRef{}, fmt.Sprintf("File %s could not be kept: Boxmaker's attachments directory failed; see docs/runbook.md#gateway-file-unfetchable", shown)
	}
	raw, err := dir.temp()
	if err != nil {
		g.log.Error("attachments temp file", "session", session, "err", err.Error())
		return wire.FileRef{}, fmt.Sprintf("File %s could not be kept: Boxmaker's attachments directory failed; see docs/runbook.md#gateway-file-unfetchable", shown)
	}
	defer raw.Close()
	n, err := g.mm.Download(ctx, id, min(MaxFileBytes, MaxPostBytes-*total), raw)
	*total += n
	if errors.Is(err, mattermost.ErrTooLarge) {
		return wire.FileRef{}, fmt.Sprintf("File %s is larger than the server said, over Boxmaker's cap; it was not read; see docs/runbook.md#gateway-file-too-large", shown)
	}
	if err != nil {
		return wire.FileRef{}, unfetchable(shown, err)
	}
	typ, kept, err := keep(raw, n)
	if err == nil && image != strings.HasPrefix(typ, "image/") {
		said := "it is not an image"
		if image {
			said = "it is " + render.Plain(info.MimeType)
		}
		err = fmt.Errorf("its content is %s but its name says %s", typ, said)
	}
	if err != nil {
		return wire.FileRef{}, fmt.Sprintf("File %s was not read: %s; see docs/runbook.md#gateway-file-type", shown, render.Plain(err.Error()))
	}
	if kept != nil {
		// A text rendition replaces the download.
		raw.Close()
		if raw, err = dir.temp(); err == nil {
			_, err = raw.Write(kept)
		}
		if err != nil {
			return wire.FileRef{}, fmt.Sprintf("File %s could not be kept: Boxmaker's attachments directory failed; see docs/runbook.md#gateway-file-unfetchable", shown)
		}
		n = int64(len(kept))
	}
	if err := dir.commit(raw, id); err != nil {
		g.log.Error("attachments commit", "session", session, "file", id, "err", err.Error())
		return wire.FileRef{}, fmt.Sprintf("File %s could not be kept: Boxmaker's attachments directory failed; see docs/runbook.md#gateway-file-unfetchable", shown)
	}
	return wire.FileRef{ID: id, Name: name, Type: typ, Size: n}, ""
}

// unfetchable is the owner's line for a file the server would not give.
func unfetchable(shown string, err error) string {
	return fmt.Sprintf("File %s could not be fetched from Mattermost (%s); it was not read; see docs/runbook.md#gateway-file-unfetchable", shown, render.Plain(truncate.Ellipsis(err.Error(), 200)))
}

// fileName is the name to describe a file by: the server's, cut to
// [wire.MaxFileName] bytes of valid UTF-8, or the id if it has none.
func fileName(name, id string) string {
	name = strings.ToValidUTF8(strings.TrimSpace(name), "\uFFFD")
	if name == "" {
		return id
	}
	return truncate.Ellipsis(name, wire.MaxFileName)
}

// keep sniffs the downloaded file f (n bytes) and decides what is kept:
// its media type, and the text to keep instead of the download (nil to
// keep the download as it is). Anything but text, a PDF with a text
// layer, or an image of the types a vision model reads is refused.
func keep(f *os.File, n int64) (string, []byte, error) {
	head := make([]byte, 512)
	m, err := f.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", nil, fmt.Errorf("reading it back failed")
	}
	sniffed, _, _ := strings.Cut(http.DetectContentType(head[:m]), ";")
	switch {
	case n == 0:
		return "", nil, errors.New("it is empty")
	case strings.HasPrefix(sniffed, "text/"):
		if n > MaxTextBytes {
			return "", nil, fmt.Errorf("its text is %d bytes, over the cap of %d", n, MaxTextBytes)
		}
		b := make([]byte, n)
		if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
			return "", nil, fmt.Errorf("reading it back failed")
		}
		if utf8.Valid(b) {
			return "text/plain", nil, nil
		}
		return "text/plain", []byte(strings.ToValidUTF8(string(b), "\uFFFD")), nil
	case sniffed == "application/pdf":
		b := make([]byte, n)
		if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
			return "", nil, fmt.Errorf("reading it back failed")
		}
		text, _, err := pdftext.Text(b, MaxTextBytes)
		if err != nil || text == "" {
			return "", nil, errors.New("it is a PDF with no text Boxmaker can extract (a scan, or fonts without a text layer)")
		}
		return "application/pdf", []byte(text), nil
	case sniffed == "image/png" || sniffed == "image/jpeg" || sniffed == "image/gif" || sniffed == "image/webp":
		return sniffed, nil, nil
	}
	return "", nil, fmt.Errorf("its content is %s, a type Boxmaker does not read (text, PDF, PNG, JPEG, GIF, WebP)", render.Plain(sniffed))
}
