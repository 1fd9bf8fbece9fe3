package honcho

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd/honchoconf"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

// MaxPageSize is the largest page of a paginated route
// (fastapi-pagination's Params: size le=100).
const MaxPageSize = 100

// Page is one page of a session's messages.
type Page struct {
	Items []Message
	Total int64
	Page  int64
	Size  int64
	Pages int64
}

type pageJSON struct {
	Items []messageJSON `json:"items"`
	Total int64         `json:"total"`
	Page  int64         `json:"page"`
	Size  int64         `json:"size"`
	Pages int64         `json:"pages"`
}

// DecodePage decodes a fastapi-pagination Page of messages: items,
// total, page, size and pages, and nothing else.
func DecodePage(b []byte) (Page, error) {
	var j pageJSON
	if err := strict.Unmarshal(b, &j); err != nil {
		return Page{}, undecodable("page", err)
	}
	if j.Items == nil || j.Total < 0 || j.Page < 1 || j.Size < 1 || j.Size > MaxPageSize || j.Pages < 0 || int64(len(j.Items)) > j.Size {
		return Page{}, undecodable("page", fmt.Errorf("items %d, total %d, page %d, size %d, pages %d do not make a page", len(j.Items), j.Total, j.Page, j.Size, j.Pages))
	}
	items, err := strict.Marshal(j.Items)
	if err != nil {
		return Page{}, undecodable("page", err)
	}
	msgs, err := DecodeMessages(items)
	if err != nil {
		return Page{}, err
	}
	return Page{Items: msgs, Total: j.Total, Page: j.Page, Size: j.Size, Pages: j.Pages}, nil
}

// ListMessages reads page (from 1) of session s's messages, size at a
// time, newest first if reverse (POST
// /v3/workspaces/{w}/sessions/{s}/messages/list?page=&size=&reverse=;
// src/routers/messages.py get_messages, with no filter body). Every item
// must be of w and s.
func (c *Client) ListMessages(ctx context.Context, w, s honchoconf.ID, page, size int, reverse bool) (Page, error) {
	const op = "list honcho messages"
	if err := need(op, w, s); err != nil {
		return Page{}, err
	}
	if page < 1 || size < 1 || size > MaxPageSize {
		return Page{}, refuse(op, "page %d size %d, want page from 1 and size 1 to %d", page, size, MaxPageSize)
	}
	u := c.base.JoinPath(ws(w, "sessions", s.String(), "messages", "list")...)
	u.RawQuery = url.Values{"page": {strconv.Itoa(page)}, "size": {strconv.Itoa(size)}, "reverse": {strconv.FormatBool(reverse)}}.Encode()
	// An empty filter object, as the SDK sends (Session._listMessages
	// posts {filters: undefined}); get_messages' body is optional.
	_, b, err := c.doURL(ctx, op, http.MethodPost, u, struct{}{}, http.StatusOK)
	if err != nil {
		return Page{}, err
	}
	p, err := DecodePage(b)
	for i := range p.Items {
		if err == nil && (p.Items[i].Workspace != w || p.Items[i].Session != s) {
			err = undecodable("page", fmt.Errorf("[%d] lies outside the session listed", i))
		}
	}
	if err != nil {
		return Page{}, fmt.Errorf("%s: %w", op, err)
	}
	return p, nil
}
