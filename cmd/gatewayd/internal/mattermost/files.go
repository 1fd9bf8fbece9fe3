package mattermost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/gatewayd"
	"wntrmute.dev/boxmaker/pkg/text/truncate"
)

// The files API: GET /posts/{id}/files/info answers the post's files'
// model.FileInfo JSON (server/channels/api4/post.go getFileInfosForPost),
// GET /files/{id} a file's bytes (api4/file.go getFile); both need
// read_channel on the post's channel (or, for a file, to be its
// uploader).

// FileInfo is the part of model.FileInfo (server/public/model/
// file_info.go) gatewayd reads. Every field is the server's (and, for the
// name, the sender's) word: gatewayd trusts none of them for what the
// file holds, and sniffs the content itself.
type FileInfo struct {
	ID       string `json:"id"`
	PostID   string `json:"post_id"`
	Name     string `json:"name"`
	Size     int64  `json:"size"`
	MimeType string `json:"mime_type"`
	DeleteAt int64  `json:"delete_at"`
}

// MaxPostFiles caps the infos read for one post (the server keeps a
// post's file_ids within 300 runes, model.PostFileidsMaxRunes: at most
// 10 ids of 26 characters in JSON).
const MaxPostFiles = 10

// FileInfosForPost fetches the infos of the files attached to post (GET
// /posts/{id}/files/info, api4/post.go getFileInfosForPost, as the
// official client's getFileInfosForPost): the server's own list of what
// belongs to the post, so a file id the post does not hold never passes
// for one of its files. Infos with a bad id or size are dropped.
func (c *Client) FileInfosForPost(ctx context.Context, post string) (map[string]*FileInfo, error) {
	if !gatewayd.ValidID(post) {
		return nil, fmt.Errorf("file infos: bad post id %q", post)
	}
	var list []*FileInfo
	if err := c.do(ctx, "file infos", http.MethodGet, "/posts/"+post+"/files/info", nil, nil, &list); err != nil {
		return nil, err
	}
	out := map[string]*FileInfo{}
	for _, fi := range list {
		if fi == nil || !gatewayd.ValidID(fi.ID) || fi.Size < 0 || len(out) == MaxPostFiles {
			continue
		}
		out[fi.ID] = fi
	}
	return out, nil
}

// ErrTooLarge is a download that went past its cap.
var ErrTooLarge = errors.New("over the size cap")

// Download streams file id (GET /files/{id}) into w, at most max bytes:
// a longer body is [ErrTooLarge] after max bytes were written. A 429 is
// retried as [Client.do] does, before any byte is written.
func (c *Client) Download(ctx context.Context, id string, max int64, w io.Writer) (int64, error) {
	if !gatewayd.ValidID(id) {
		return 0, fmt.Errorf("download file: bad id %q", id)
	}
	u := *c.base
	u.Path += "/api/v4/files/" + id
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return 0, fmt.Errorf("mattermost download file: %v", err)
		}
		req.Header.Set("Authorization", "Bearer "+c.token.Reveal())
		// The client's whole-request timeout would cut a large file on a
		// slow link; the caller's context bounds the download instead.
		resp, err := c.dl.Do(req)
		if err != nil {
			return 0, fmt.Errorf("mattermost download file: %v", scrub(err))
		}
		if resp.StatusCode == http.StatusTooManyRequests && attempt < c.MaxRetries {
			resp.Body.Close()
			select {
			case <-time.After(retryAfter(resp.Header.Get("Retry-After"), c.MaxWait)):
				continue
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			e := &APIError{Op: "download file", Status: resp.StatusCode}
			var app struct {
				ID      string `json:"id"`
				Message string `json:"message"`
			}
			if json.Unmarshal(b, &app) == nil {
				e.ID, e.Msg = truncate.Ellipsis(app.ID, 200), truncate.Ellipsis(app.Message, 500)
			}
			return 0, e
		}
		if resp.ContentLength > max {
			return 0, ErrTooLarge
		}
		n, err := io.Copy(w, io.LimitReader(resp.Body, max+1))
		switch {
		case err != nil:
			return n, fmt.Errorf("mattermost download file: %v", scrub(err))
		case n > max:
			return n, ErrTooLarge
		case resp.ContentLength >= 0 && n != resp.ContentLength:
			return n, fmt.Errorf("mattermost download file: %d of %d bytes", n, resp.ContentLength)
		}
		return n, nil
	}
}

// UploadFile uploads data as a file named name to channel (POST /files,
// api4/file.go uploadFileStream, multipart: the channel_id field, then
// the file as a "files" part, as the official client's uploadFile sends
// a FormData) and returns its id, to attach to a post.
func (c *Client) UploadFile(ctx context.Context, channel, name string, data []byte) (string, error) {
	if !gatewayd.ValidID(channel) {
		return "", fmt.Errorf("upload file: bad channel id %q", channel)
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mw.WriteField("channel_id", channel)
	fw, err := mw.CreateFormFile("files", name)
	if err != nil {
		return "", fmt.Errorf("upload file: %v", err)
	}
	fw.Write(data)
	if err := mw.Close(); err != nil {
		return "", fmt.Errorf("upload file: %v", err)
	}
	u := *c.base
	u.Path += "/api/v4/files"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body.Bytes()))
	if err != nil {
		return "", fmt.Errorf("mattermost upload file: %v", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token.Reveal())
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Accept", "application/json")
	resp, err := c.dl.Do(req)
	if err != nil {
		return "", fmt.Errorf("mattermost upload file: %v", scrub(err))
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusCreated {
		e := &APIError{Op: "upload file", Status: resp.StatusCode}
		var app struct {
			ID      string `json:"id"`
			Message string `json:"message"`
		}
		if json.Unmarshal(b, &app) == nil {
			e.ID, e.Msg = truncate.Ellipsis(app.ID, 200), truncate.Ellipsis(app.Message, 500)
		}
		return "", e
	}
	var up struct {
		FileInfos []FileInfo `json:"file_infos"`
	}
	if err := json.Unmarshal(b, &up); err != nil || len(up.FileInfos) != 1 || !gatewayd.ValidID(up.FileInfos[0].ID) {
		return "", errors.New("mattermost upload file: the server sent no valid file info")
	}
	return up.FileInfos[0].ID, nil
}
