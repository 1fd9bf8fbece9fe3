package mattermost

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The files API, as api4/file.go InitFile routes it (server/channels/
// api4/file.go, commit 05022281): POST /files (uploadFileStream), GET
// /files/{id} (getFile) and GET /files/{id}/info (getFileInfo). A post's
// file_ids attach uploaded files to it (app/post.go attachFilesToPost).

// FileInfo is model.FileInfo's JSON (server/public/model/file_info.go):
// Path, ThumbnailPath, PreviewPath and Content are `json:"-"` there and
// never sent.
type FileInfo struct {
	ID              string  `json:"id"`
	CreatorID       string  `json:"user_id"`
	PostID          string  `json:"post_id,omitempty"`
	ChannelID       string  `json:"channel_id"`
	CreateAt        int64   `json:"create_at"`
	UpdateAt        int64   `json:"update_at"`
	DeleteAt        int64   `json:"delete_at"`
	Name            string  `json:"name"`
	Extension       string  `json:"extension"`
	Size            int64   `json:"size"`
	MimeType        string  `json:"mime_type"`
	Width           int     `json:"width,omitempty"`
	Height          int     `json:"height,omitempty"`
	HasPreviewImage bool    `json:"has_preview_image,omitempty"`
	MiniPreview     *[]byte `json:"mini_preview"`
	RemoteID        *string `json:"remote_id"`
	Archived        bool    `json:"archived"`
}

// storedFile is one uploaded file: its info and its bytes.
type storedFile struct {
	info FileInfo
	data []byte
}

// MaxFileSize is FileSettings.MaxFileSize's default, 100 MiB
// (server/public/model/config.go, FileSettings.SetDefaults: 104857600).
const MaxFileSize = 100 << 20

// Upload stores data as a file user uploaded to channel, through the
// same path as POST /files, and returns its info (not yet attached to a
// post: give its id in a post's FileIDs).
func (s *Server) Upload(user, channel, name string, data []byte) (FileInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	info, err := s.storeFile(user, channel, name, data)
	if err != nil {
		return FileInfo{}, err
	}
	return info, nil
}

// StallFile makes GET /files/{id} send the first half of the file, then
// wait until release is called (or the client goes), and then end
// without the rest: a download cut off mid-way.
func (s *Server) StallFile(id string) (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	if s.stalls == nil {
		s.stalls = map[string]chan struct{}{}
	}
	s.stalls[id] = ch
	s.mu.Unlock()
	var once bool
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !once {
			once = true
			close(ch)
		}
	}
}

// FileData returns a stored file's bytes (what a post's reader would
// download), or false.
func (s *Server) FileData(id string) ([]byte, FileInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[id]
	if !ok {
		return nil, FileInfo{}, false
	}
	return bytes.Clone(f.data), f.info, true
}

// storeFile is app/file.go UploadFileX for the fake: the uploader must
// be a member of the channel (PermissionUploadFile, checked in api4 by
// SessionHasPermissionToChannelContent), the size at most MaxFileSize
// (413 api.file.upload_file.too_large_detailed.app_error), and the info
// is model.NewInfo's: the extension lower-cased without its dot, the
// mime type from it (mime.TypeByExtension). Caller holds s.mu.
func (s *Server) storeFile(user, channel, name string, data []byte) (FileInfo, error) {
	ch, ok := s.channels[channel]
	if !ok || !ch.Members[user] {
		return FileInfo{}, newAppError(403, "api.context.permissions.app_error", "You do not have the appropriate permissions.")
	}
	if len(data) > MaxFileSize {
		return FileInfo{}, newAppError(413, "api.file.upload_file.too_large_detailed.app_error", "Unable to upload file. File is too large.")
	}
	if name == "" {
		return FileInfo{}, newAppError(400, "api.context.invalid_url_param.app_error", "Invalid or missing filename parameter in request URL.")
	}
	// app/file.go: the name is the base name of what the client sent.
	name = filepath.Base(name)
	ext := strings.ToLower(filepath.Ext(name))
	remote := ""
	now := s.now()
	info := FileInfo{ID: newID(), CreatorID: user, ChannelID: channel, CreateAt: now, UpdateAt: now,
		Name: name, Extension: strings.TrimPrefix(ext, "."), Size: int64(len(data)), MimeType: mime.TypeByExtension(ext), RemoteID: &remote}
	if s.files == nil {
		s.files = map[string]*storedFile{}
	}
	s.files[info.ID] = &storedFile{info: info, data: bytes.Clone(data)}
	return info, nil
}

// attachFiles is app/post.go attachFilesToPost with the store's
// FileInfoStore.AttachToPost: a file is attached only if it exists, is
// not attached to a post yet, and was uploaded by the post's author;
// the others are dropped from the post's file_ids (the server logs them
// and overwrites the post). Caller holds s.mu.
func (s *Server) attachFiles(p *Post) {
	var kept []string
	for _, id := range p.FileIDs {
		f, ok := s.files[id]
		if !ok || f.info.PostID != "" || f.info.CreatorID != p.UserID {
			continue
		}
		f.info.PostID, f.info.ChannelID = p.ID, p.ChannelID
		kept = append(kept, id)
	}
	if kept == nil {
		kept = []string{}
	}
	p.FileIDs = kept
}

// readable is getFileInfo's and getFile's check: the file's creator, or
// a user with read_channel on the post's channel
// (SessionHasPermissionToChannelByPost); a file attached to no post is
// readable by its creator only. Caller holds s.mu.
func (s *Server) readable(user string, f *storedFile) bool {
	if f.info.CreatorID == user {
		return true
	}
	p, ok := s.posts[f.info.PostID]
	if !ok {
		return false
	}
	ch, ok := s.channels[p.ChannelID]
	return ok && ch.Members[user]
}

// fileFor finds the file of the request's {id} that user may read, or
// the AppError the server answers: 404 app.file_info.get.app_error for
// an unknown id (store ErrNotFound through app/file.go GetFileInfo),
// 403 for one the user may not read.
func (s *Server) fileFor(user string, r *http.Request) (*storedFile, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[r.PathValue("id")]
	if !ok || f.info.DeleteAt != 0 {
		return nil, newAppError(404, "app.file_info.get.app_error", "Unable to get the file info.")
	}
	if !s.readable(user, f) {
		return nil, newAppError(403, "api.context.permissions.app_error", "You do not have the appropriate permissions.")
	}
	return &storedFile{info: f.info, data: f.data}, nil
}

// getFileInfo is api4/file.go getFileInfo: the info as JSON, with
// Cache-Control "max-age=2592000, private".
func (s *Server) getFileInfo(w http.ResponseWriter, r *http.Request) {
	user, ok := s.gate(w, r)
	if !ok {
		return
	}
	f, err := s.fileFor(user, r)
	if err != nil {
		writeAppError(w, err.(*appError))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "max-age=2592000, private")
	json.NewEncoder(w).Encode(f.info)
}

// getFile is api4/file.go getFile through web.WriteFileResponse
// (server/platform/shared/web/response.go... reference: the function
// api4/file.go calls): Content-Type the
// info's mime type (application/octet-stream when empty), Content-Length
// the size, X-Content-Type-Options nosniff, and Content-Disposition
// attachment with the name (inline only for the types the server shows
// in the browser; the fake always says attachment, which is what a
// download with ?download=1 gets).
func (s *Server) getFile(w http.ResponseWriter, r *http.Request) {
	user, ok := s.gate(w, r)
	if !ok {
		return
	}
	f, err := s.fileFor(user, r)
	if err != nil {
		writeAppError(w, err.(*appError))
		return
	}
	typ := f.info.MimeType
	if typ == "" {
		typ = "application/octet-stream"
	}
	w.Header().Set("Content-Type", typ)
	w.Header().Set("Content-Length", strconv.Itoa(len(f.data)))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment;filename=%q", f.info.Name))
	w.Header().Set("Last-Modified", time.UnixMilli(f.info.UpdateAt).UTC().Format(http.TimeFormat))
	w.WriteHeader(http.StatusOK)
	s.mu.Lock()
	stall := s.stalls[f.info.ID]
	s.mu.Unlock()
	if stall == nil {
		w.Write(f.data)
		return
	}
	// A stalled download: half, then nothing until released.
	w.Write(f.data[:len(f.data)/2])
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
	select {
	case <-stall:
	case <-r.Context().Done():
	}
	// Ending the handler now sends fewer bytes than Content-Length
	// said: the client reads an unexpected EOF.
	panic(http.ErrAbortHandler)
}

// uploadFileStream is api4/file.go uploadFileStream: a simple upload
// (channel_id and filename in the query, the file as the body; an empty
// body is 400), or multipart/form-data with channel_id before the files
// parts (the streaming mode) and optional client_ids, one per file.
// Answered 201 with model.FileUploadResponse {file_infos, client_ids}.
func (s *Server) uploadFile(user string, r *http.Request) (int, any, error) {
	type response struct {
		FileInfos []FileInfo `json:"file_infos"`
		ClientIDs []string   `json:"client_ids"`
	}
	if r.ContentLength == 0 {
		return 0, nil, newAppError(400, "api.file.upload_file.read_request.app_error", "Unable to upload file(s). Error reading or parsing request data.")
	}
	ct, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || ct != "multipart/form-data" {
		q := r.URL.Query()
		data, err := io.ReadAll(io.LimitReader(r.Body, MaxFileSize+1))
		if err != nil {
			return 0, nil, newAppError(400, "api.file.upload_file.read_request.app_error", "Unable to upload file(s). Error reading or parsing request data.")
		}
		if q.Get("channel_id") == "" {
			return 0, nil, newAppError(400, "api.context.invalid_url_param.app_error", "Invalid or missing channel_id parameter in request URL.")
		}
		s.mu.Lock()
		info, err := s.storeFile(user, q.Get("channel_id"), q.Get("filename"), data)
		s.mu.Unlock()
		if err != nil {
			return 0, nil, err
		}
		out := response{FileInfos: []FileInfo{info}, ClientIDs: []string{}}
		if c := q.Get("client_id"); c != "" {
			out.ClientIDs = []string{c}
		}
		return http.StatusCreated, out, nil
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	out := response{FileInfos: []FileInfo{}, ClientIDs: []string{}}
	channel := r.URL.Query().Get("channel_id")
	var clientIDs []string
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, nil, newAppError(400, "api.file.upload_file.read_request.app_error", "Unable to upload file(s). Error reading or parsing request data.")
		}
		if part.FormName() == "" {
			continue
		}
		if part.FileName() == "" {
			v, _ := io.ReadAll(io.LimitReader(part, 10<<10)) // maxMultipartFormDataBytes
			switch part.FormName() {
			case "channel_id":
				channel = string(v)
			case "client_ids":
				clientIDs = append(clientIDs, string(v))
			default:
				return 0, nil, newAppError(400, "api.context.invalid_param.app_error", "Invalid "+part.FormName()+" parameter.")
			}
			continue
		}
		if channel == "" {
			return 0, nil, newAppError(400, "api.context.invalid_url_param.app_error", "Invalid or missing channel_id parameter in request URL.")
		}
		data, err := io.ReadAll(io.LimitReader(part, MaxFileSize+1))
		if err != nil {
			return 0, nil, newAppError(400, "api.file.upload_file.read_request.app_error", "Unable to upload file(s). Error reading or parsing request data.")
		}
		s.mu.Lock()
		info, err := s.storeFile(user, channel, part.FileName(), data)
		s.mu.Unlock()
		if err != nil {
			return 0, nil, err
		}
		out.FileInfos = append(out.FileInfos, info)
	}
	if len(clientIDs) != 0 {
		if len(clientIDs) != len(out.FileInfos) {
			return 0, nil, newAppError(400, "api.file.upload_file.incorrect_number_of_client_ids.app_error", "Unable to upload file(s). Have client_ids for files.")
		}
		out.ClientIDs = clientIDs
	}
	return http.StatusCreated, out, nil
}

// getFileInfosForPost is api4/post.go getFileInfosForPost: read_channel
// content on the post's channel (403 otherwise; 404 for an unknown
// post, as SessionHasPermissionToChannelByPost finds no channel), then
// the infos of the files attached to the post and not deleted
// (app/file.go GetFileInfosForPost; ?include_deleted=true adds deleted
// ones), as a JSON array ([] for none), with Cache-Control "max-age=
// 2592000, private". Reference silent on the order: the fake gives the
// post's file_ids order.
func (s *Server) getFileInfosForPost(w http.ResponseWriter, r *http.Request) {
	user, ok := s.gate(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	p, ok := s.posts[r.PathValue("id")]
	var ch *Channel
	if ok {
		ch = s.channels[p.ChannelID]
	}
	if !ok || ch == nil || !ch.Members[user] {
		s.mu.Unlock()
		writeAppError(w, newAppError(403, "api.context.permissions.app_error", "You do not have the appropriate permissions."))
		return
	}
	infos := []FileInfo{}
	for _, id := range p.FileIDs {
		if f, ok := s.files[id]; ok && (f.info.DeleteAt == 0 || r.URL.Query().Get("include_deleted") == "true") {
			infos = append(infos, f.info)
		}
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "max-age=2592000, private")
	json.NewEncoder(w).Encode(infos)
}

// DeleteFile marks a file deleted (its DeleteAt set), as the server does
// when its post is deleted (app/file.go DeleteFilesForPost... reference:
// FileInfoStore.DeleteForPost): its info and bytes answer 404 after.
func (s *Server) DeleteFile(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.files[id]; ok {
		f.info.DeleteAt = s.now()
	}
}
