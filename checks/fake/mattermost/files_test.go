package mattermost

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFiles: an upload (simple and multipart) is readable by its
// uploader alone until a post attaches it, then by the channel's
// members; a post keeps only the file ids its author uploaded and that
// were unattached (app/post.go attachFilesToPost); info and download
// answer as api4/file.go does, and an unknown id is a 404 AppError.
func TestFiles(t *testing.T) {
	s := New(t)
	owner, bot, other := s.AddUser("owner", false), s.AddUser("bot", true), s.AddUser("other", false)
	dm := s.Direct(owner.ID, bot.ID)
	bearer := func(tok string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
	}

	// Simple upload: channel_id and filename in the query.
	req, _ := http.NewRequest("POST", s.URL()+"/api/v4/files?channel_id="+dm+"&filename=notes.txt", bytes.NewReader([]byte("hello\n")))
	bearer(owner.Token)(req)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var up struct {
		FileInfos []FileInfo `json:"file_infos"`
		ClientIDs []string   `json:"client_ids"`
	}
	require.Equal(t, 201, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&up))
	resp.Body.Close()
	require.Len(t, up.FileInfos, 1)
	txt := up.FileInfos[0]
	require.Equal(t, "txt", txt.Extension)
	require.Equal(t, "text/plain; charset=utf-8", txt.MimeType)
	require.EqualValues(t, 6, txt.Size)

	// Multipart: channel_id first, then the file.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mw.WriteField("channel_id", dm)
	fw, _ := mw.CreateFormFile("files", "shot.png")
	fw.Write([]byte("\x89PNG\r\n\x1a\nrest"))
	mw.Close()
	req, _ = http.NewRequest("POST", s.URL()+"/api/v4/files", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	bearer(owner.Token)(req)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, 201, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&up))
	resp.Body.Close()
	png := up.FileInfos[0]
	require.Equal(t, "image/png", png.MimeType)

	// Before a post attaches them, only the uploader reads them.
	if code, _, _ := get(t, s, "/api/v4/files/"+txt.ID+"/info", bearer(bot.Token)); code != 403 {
		t.Errorf("the bot read an unattached file's info: %d", code)
	}
	// The bot's own upload is not the owner's to attach; an unknown id
	// is dropped too.
	botFile, err := s.Upload(bot.ID, dm, "bot.txt", []byte("x"))
	require.NoError(t, err)
	p, err := s.PostAs(owner.ID, Post{ChannelID: dm, Message: "read these", FileIDs: []string{txt.ID, png.ID, botFile.ID, newID()}})
	require.NoError(t, err)
	require.Equal(t, []string{txt.ID, png.ID}, p.FileIDs)

	code, b, h := get(t, s, "/api/v4/files/"+txt.ID+"/info", bearer(bot.Token))
	var info FileInfo
	require.Equal(t, 200, code, b)
	require.NoError(t, json.Unmarshal([]byte(b), &info))
	require.Equal(t, p.ID, info.PostID)
	require.Equal(t, "max-age=2592000, private", h.Get("Cache-Control"))
	code, b, h = get(t, s, "/api/v4/files/"+txt.ID, bearer(bot.Token))
	require.Equal(t, 200, code)
	require.Equal(t, "hello\n", b)
	require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))
	require.Equal(t, "6", h.Get("Content-Length"))

	// Someone outside the channel may not; an unknown id is a 404.
	if code, _, _ := get(t, s, "/api/v4/files/"+txt.ID, bearer(other.Token)); code != 403 {
		t.Errorf("a non-member downloaded the file: %d", code)
	}
	code, b, _ = get(t, s, "/api/v4/files/"+newID()+"/info", bearer(bot.Token))
	var ae appError
	if code != 404 || json.Unmarshal([]byte(b), &ae) != nil || ae.ID != "app.file_info.get.app_error" {
		t.Errorf("unknown file: %d %s", code, b)
	}
}

// TestStallFile: a stalled download sends half the file and then breaks
// off, so the client reads an unexpected EOF.
func TestStallFile(t *testing.T) {
	s := New(t)
	owner, bot := s.AddUser("owner", false), s.AddUser("bot", true)
	dm := s.Direct(owner.ID, bot.ID)
	f, err := s.Upload(owner.ID, dm, "big.txt", bytes.Repeat([]byte("a"), 1000))
	require.NoError(t, err)
	_, err = s.PostAs(owner.ID, Post{ChannelID: dm, Message: "x", FileIDs: []string{f.ID}})
	require.NoError(t, err)
	release := s.StallFile(f.ID)
	req, _ := http.NewRequest("GET", s.URL()+"/api/v4/files/"+f.ID, nil)
	req.Header.Set("Authorization", "Bearer "+bot.Token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	head := make([]byte, 500)
	_, err = io.ReadFull(resp.Body, head)
	require.NoError(t, err)
	release()
	if rest, err := io.ReadAll(resp.Body); err == nil {
		t.Errorf("a stalled download ended cleanly after %d more bytes", len(rest))
	}
}
