package gateway

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	fake "wntrmute.dev/boxmaker/checks/fake/mattermost"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/gatewayd"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// onePagePDF is a one-page PDF whose FlateDecode content stream shows
// text, as simple writers make it.
func onePagePDF(text string) []byte {
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	fmt.Fprintf(w, "BT /F1 12 Tf 72 720 Td (%s) Tj ET\n", text)
	w.Close()
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 >> endobj\n")
	b.WriteString("3 0 obj << /Type /Page /Parent 2 0 R /Contents 4 0 R >> endobj\n")
	fmt.Fprintf(&b, "4 0 obj << /Length %d /Filter /FlateDecode >>\nstream\n", z.Len())
	b.Write(z.Bytes())
	b.WriteString("\nendstream\nendobj\ntrailer << /Root 1 0 R >>\n%%EOF\n")
	return b.Bytes()
}

// TestFilesPosted: a post with a text file, a PDF, an image, a file over
// the cap, one of a refused type and one the server will not give:
// loopd gets the text and a descriptor for each kept file (the type
// sniffed, the size kept), the session's attachments directory holds
// exactly the kept files (the text, the PDF's text, the image's bytes),
// mode 0640, and the owner gets one line for each file not kept.
func TestFilesPosted(t *testing.T) {
	r := newRig(t, func(_ *rig, c *gatewayd.Config) {
		require.NoError(t, os.MkdirAll(layout.Attachments.In(c.StateDir), 0o750))
		require.NoError(t, os.MkdirAll(layout.Images.In(c.StateDir), 0o750))
	})
	up := func(name string, data []byte) string {
		f, err := r.mm.Upload(r.owner.ID, r.dm, name, data)
		require.NoError(t, err)
		return f.ID
	}
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0}, 64)...)
	txt := up("notes.txt", []byte("line one\nline two\n"))
	pdf := up("report.pdf", onePagePDF("Revenue was 42"))
	img := up("shot.png", png)
	big := up("huge.log", bytes.Repeat([]byte("x"), MaxFileBytes+1))
	zip := up("archive.txt", []byte("PK\x03\x04\x14\x00\x00\x00binary"))
	photo := up("photo.png", []byte("just text, named as an image\n"))
	gone := up("gone.txt", []byte("never fetched"))
	r.mm.FailWhen(func(method, path string) bool { return strings.HasPrefix(path, "/api/v4/files/"+gone) })
	p, err := r.mm.PostAs(r.owner.ID, fake.Post{ChannelID: r.dm, Message: "what do these say?", FileIDs: []string{txt, pdf, img, big, zip, gone, photo}})
	require.NoError(t, err)
	r.waitLog(t, "the turn", func() bool { return len(r.loop.sent()) == 1 })
	s := r.loop.sent()[0]
	require.Equal(t, "what do these say?", s.Text)
	require.Equal(t, []wire.FileRef{
		{ID: txt, Name: "notes.txt", Type: "text/plain", Size: 18},
		{ID: pdf, Name: "report.pdf", Type: "application/pdf", Size: int64(len("Revenue was 42"))},
		{ID: img, Name: "shot.png", Type: "image/png", Size: int64(len(png))},
	}, s.Files)
	dir := filepath.Join(layout.Attachments.In(r.cfg.StateDir), "mm-"+p.ID)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
		fi, _ := e.Info()
		if fi.Mode().Perm() != 0o640 {
			t.Errorf("%s: mode %v, want 0640", e.Name(), fi.Mode())
		}
	}
	require.ElementsMatch(t, []string{txt, pdf}, names)
	b, _ := os.ReadFile(filepath.Join(dir, pdf))
	require.Equal(t, "Revenue was 42", string(b))
	// The image is where loopd reads images, not where brokerd reads text.
	b, _ = os.ReadFile(filepath.Join(layout.Images.In(r.cfg.StateDir), "mm-"+p.ID, img))
	require.Equal(t, png, b)

	var lines []string
	r.waitLog(t, "the owner's lines", func() bool {
		for _, bp := range r.botPosts(p.ID) {
			if strings.Contains(bp.Message, "was not read") {
				lines = strings.Split(bp.Message, "\n")
				return true
			}
		}
		return false
	})
	require.Len(t, lines, 4, "%q", lines)
	for _, want := range []string{"huge.log is 10485761 bytes, over Boxmaker's cap", "archive.txt was not read: its content is application/zip", "could not be fetched from Mattermost",
		"photo.png was not read: its content is text/plain but its name says it is image/png"} {
		found := false
		for _, l := range lines {
			found = found || strings.Contains(l, want) && strings.Contains(l, "see docs/runbook.md#"+"gateway-file")
		}
		if !found {
			t.Errorf("no line says %q: %q", want, lines)
		}
	}
}

// TestFileOnlyPost: a post of files and no text still reaches loopd.
func TestFileOnlyPost(t *testing.T) {
	r := newRig(t, func(_ *rig, c *gatewayd.Config) {
		require.NoError(t, os.MkdirAll(layout.Attachments.In(c.StateDir), 0o750))
	})
	f, err := r.mm.Upload(r.owner.ID, r.dm, "a.txt", []byte("hi"))
	require.NoError(t, err)
	_, err = r.mm.PostAs(r.owner.ID, fake.Post{ChannelID: r.dm, FileIDs: []string{f.ID}})
	require.NoError(t, err)
	r.waitLog(t, "the turn", func() bool { return len(r.loop.sent()) == 1 })
	if s := r.loop.sent()[0]; len(s.Files) != 1 || s.Text == "" {
		t.Errorf("loopd got %+v", s)
	}
}

// TestAttachmentCommitIsWhole: a file being written is not under its
// name until committed, and a leftover part of the fallback is swept.
func TestAttachmentCommitIsWhole(t *testing.T) {
	a := openAttachments(t.TempDir())
	require.NoError(t, os.MkdirAll(a.root, 0o750))
	d, err := a.sessionDir("mm-x", false)
	require.NoError(t, err)
	f, err := d.temp()
	require.NoError(t, err)
	f.Write([]byte("half"))
	ents, _ := os.ReadDir(d.path)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), partPrefix) {
			t.Errorf("%s is visible before its commit", e.Name())
		}
	}
	id := strings.Repeat("a", 26)
	require.NoError(t, d.commit(f, id))
	b, err := os.ReadFile(filepath.Join(d.path, id))
	require.NoError(t, err)
	require.Equal(t, "half", string(b))
	// Committing the same id again replaces it.
	f, _ = d.temp()
	f.Write([]byte("whole"))
	require.NoError(t, d.commit(f, id))
	b, _ = os.ReadFile(filepath.Join(d.path, id))
	require.Equal(t, "whole", string(b))
	os.WriteFile(filepath.Join(d.path, partPrefix+"123"), []byte("left"), 0o600)
	require.NoError(t, a.sweep())
	ents, _ = os.ReadDir(d.path)
	require.Len(t, ents, 1)
	_, err = a.sessionDir("../escape", true)
	require.Error(t, err)
}

// TestFilesUnlisted: when the server will not list a post's files, the
// owner gets one line and the message still goes to loopd, without them.
func TestFilesUnlisted(t *testing.T) {
	r := newRig(t, func(_ *rig, c *gatewayd.Config) {
		require.NoError(t, os.MkdirAll(layout.Attachments.In(c.StateDir), 0o750))
	})
	f, err := r.mm.Upload(r.owner.ID, r.dm, "a.txt", []byte("hi"))
	require.NoError(t, err)
	r.mm.FailWhen(func(method, path string) bool { return strings.HasSuffix(path, "/files/info") })
	p, err := r.mm.PostAs(r.owner.ID, fake.Post{ChannelID: r.dm, Message: "read this", FileIDs: []string{f.ID}})
	require.NoError(t, err)
	r.waitLog(t, "the turn", func() bool { return len(r.loop.sent()) == 1 })
	if s := r.loop.sent()[0]; len(s.Files) != 0 || s.Text != "read this" {
		t.Errorf("loopd got %+v", s)
	}
	r.waitLog(t, "the line", func() bool {
		for _, bp := range r.botPosts(p.ID) {
			if strings.Contains(bp.Message, "The 1 file(s) of this message could not be listed by Mattermost") {
				return true
			}
		}
		return false
	})
}
