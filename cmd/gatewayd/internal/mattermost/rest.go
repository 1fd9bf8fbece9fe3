package mattermost

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/gatewayd"
	"wntrmute.dev/boxmaker/pkg/host/secret"
	"wntrmute.dev/boxmaker/pkg/text/truncate"
)

// Client talks to one Mattermost server as one bot.
type Client struct {
	base  *url.URL
	token secret.Value
	http  *http.Client
	dl    *http.Client // for downloads: the same transport, no whole-request timeout (files.go)

	// MaxRetries bounds how often a rate-limited (429) call is retried.
	MaxRetries int
	// MaxWait caps one Retry-After wait.
	MaxWait time.Duration
}

// MaxBody caps any response body the client reads.
const MaxBody = 16 << 20

// NewClient returns a client of the server at base (https, or http only
// when the URL says so). caFile, if not empty, is a PEM file of extra
// roots added to the system's.
func NewClient(base string, token secret.Value, caFile string) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("mattermost url: %v", err)
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("mattermost url %q: want https://host[:port][/path] (or http:// to go without TLS)", base)
	}
	if token.IsZero() {
		return nil, errors.New("mattermost: the bot token is empty")
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("mattermost ca_file: %v", err)
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("mattermost ca_file %s: no PEM certificate in it", caFile)
		}
	}
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		Proxy:               nil, // gatewayd reaches Mattermost directly, never through a proxy from the environment
		MaxIdleConns:        4,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 15 * time.Second,
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client{base: u, token: token, http: &http.Client{Transport: tr, Timeout: 60 * time.Second, CheckRedirect: noRedirect},
		dl:         &http.Client{Transport: tr, CheckRedirect: noRedirect},
		MaxRetries: 5, MaxWait: time.Minute}, nil
}

// APIError is a failed call: the status and the server's AppError id
// (model.AppError), if the body was one.
type APIError struct {
	Op     string
	Status int
	ID     string
	Msg    string
}

func (e *APIError) Error() string {
	if e.ID != "" {
		return fmt.Sprintf("mattermost %s: %d %s: %s", e.Op, e.Status, e.ID, e.Msg)
	}
	return fmt.Sprintf("mattermost %s: %d", e.Op, e.Status)
}

// do makes one REST call, retrying a 429 after its Retry-After.
func (c *Client) do(ctx context.Context, op, method, path string, query url.Values, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("mattermost %s: %v", op, err)
		}
	}
	u := *c.base
	u.Path += "/api/v4" + path
	u.RawQuery = query.Encode()
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("mattermost %s: %v", op, err)
		}
		req.Header.Set("Authorization", "Bearer "+c.token.Reveal())
		req.Header.Set("Accept", "application/json")
		if in != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.http.Do(req)
		if err != nil {
			return fmt.Errorf("mattermost %s: %v", op, scrub(err))
		}
		b, rerr := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
		resp.Body.Close()
		if rerr != nil {
			return fmt.Errorf("mattermost %s: read: %v", op, rerr)
		}
		if len(b) > MaxBody {
			return fmt.Errorf("mattermost %s: response over %d bytes", op, MaxBody)
		}
		if resp.StatusCode == http.StatusTooManyRequests && attempt < c.MaxRetries {
			// ratelimit.go: Retry-After is seconds from now; the body
			// is plain text, not an AppError.
			wait := retryAfter(resp.Header.Get("Retry-After"), c.MaxWait)
			select {
			case <-time.After(wait):
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if resp.StatusCode/100 != 2 {
			e := &APIError{Op: op, Status: resp.StatusCode}
			var app struct {
				ID      string `json:"id"`
				Message string `json:"message"`
			}
			if json.Unmarshal(b, &app) == nil {
				e.ID, e.Msg = truncate.Ellipsis(app.ID, 200), truncate.Ellipsis(app.Message, 500)
			}
			return e
		}
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("mattermost %s: decode: %v", op, err)
		}
		return nil
	}
}

// scrub keeps URL errors from quoting the URL (which never holds the
// token, but may hold a path the owner did not mean to log).
func scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func retryAfter(h string, max time.Duration) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(h))
	if err != nil || n < 0 {
		n = 1
	}
	d := time.Duration(n) * time.Second
	if d > max {
		d = max
	}
	if d == 0 {
		d = 100 * time.Millisecond
	}
	return d
}

// Me returns the bot's own user (GET /users/me).
func (c *Client) Me(ctx context.Context) (*User, error) {
	var u User
	if err := c.do(ctx, "users/me", http.MethodGet, "/users/me", nil, nil, &u); err != nil {
		return nil, err
	}
	if !gatewayd.ValidID(u.ID) {
		return nil, errors.New("mattermost users/me: the server sent no valid user id")
	}
	return &u, nil
}

// NewPost is what CreatePost sends (model.Post's writable fields).
type NewPost struct {
	ChannelID string         `json:"channel_id"`
	RootID    string         `json:"root_id"`
	Message   string         `json:"message"`
	Props     map[string]any `json:"props"`
	FileIDs   []string       `json:"file_ids"`
}

// PropUnsafeLinks is the post prop that turns off the server's link
// previews for a post: server/channels/app/post_metadata.go,
// getEmbedsAndImages, reads UnsafeLinksPostProp ("unsafe_links";
// model.PostPropsUnsafeLinks in server/public/model/post.go) and when
// it is the string "true" drops the post's inline images and returns
// before getEmbedForPost unless the first link is a permalink to the
// server itself: no OpenGraph or image fetch for a URL in the message.
const PropUnsafeLinks = "unsafe_links"

// CreatePost posts message in channel, in thread root if not empty
// (POST /posts), with [PropUnsafeLinks] set: every post gatewayd makes
// may quote the model, so the server must fetch no URL in it. The
// message must be within [MaxRunes]; use [Split].
func (c *Client) CreatePost(ctx context.Context, channel, root, message string) (*Post, error) {
	return c.CreatePostProp(ctx, channel, root, message, "", "")
}

// CreatePostProp is [Client.CreatePost] with one more string prop, key
// (none if key is empty): gatewayd's mark of what a post delivers.
func (c *Client) CreatePostProp(ctx context.Context, channel, root, message, key, value string) (*Post, error) {
	return c.CreatePostFiles(ctx, channel, root, message, key, value, nil)
}

// CreatePostFiles is [Client.CreatePostProp] with files attached: the
// ids of files this bot uploaded ([Client.UploadFile]) and no post holds
// yet (app/post.go attachFilesToPost drops any other).
func (c *Client) CreatePostFiles(ctx context.Context, channel, root, message, key, value string, files []string) (*Post, error) {
	if files == nil {
		files = []string{}
	}
	props := map[string]any{PropUnsafeLinks: "true"}
	if key != "" && key != PropUnsafeLinks {
		props[key] = value
	}
	var p Post
	err := c.do(ctx, "create post", http.MethodPost, "/posts", nil,
		&NewPost{ChannelID: channel, RootID: root, Message: message, Props: props, FileIDs: files}, &p)
	if err != nil {
		return nil, err
	}
	if err := p.check(); err != nil {
		return nil, err
	}
	return &p, nil
}

// PatchMessage replaces a post's message (PUT /posts/{id}/patch).
func (c *Client) PatchMessage(ctx context.Context, id, message string) error {
	if !gatewayd.ValidID(id) {
		return fmt.Errorf("patch post: bad id %q", id)
	}
	return c.do(ctx, "patch post", http.MethodPut, "/posts/"+id+"/patch", nil, map[string]string{"message": message}, nil)
}

// GetPost fetches one post (GET /posts/{id}).
func (c *Client) GetPost(ctx context.Context, id string) (*Post, error) {
	if !gatewayd.ValidID(id) {
		return nil, fmt.Errorf("get post: bad id %q", id)
	}
	var p Post
	if err := c.do(ctx, "get post", http.MethodGet, "/posts/"+id, nil, nil, &p); err != nil {
		return nil, err
	}
	if err := p.check(); err != nil || p.ID != id {
		return nil, errors.New("get post: the server sent another or a malformed post")
	}
	return &p, nil
}

// DirectChannel returns the direct channel between the bot and user
// (POST /channels/direct, created if new).
func (c *Client) DirectChannel(ctx context.Context, me, user string) (*Channel, error) {
	var ch Channel
	if err := c.do(ctx, "direct channel", http.MethodPost, "/channels/direct", nil, []string{me, user}, &ch); err != nil {
		return nil, err
	}
	if !gatewayd.ValidID(ch.ID) || ch.Type != ChannelDirect {
		return nil, errors.New("direct channel: the server sent no valid direct channel")
	}
	return &ch, nil
}

// Typing shows the bot as typing in channel, in thread root
// (POST /users/me/typing).
func (c *Client) Typing(ctx context.Context, channel, root string) error {
	return c.do(ctx, "typing", http.MethodPost, "/users/me/typing", nil, map[string]string{"channel_id": channel, "parent_id": root}, nil)
}

// Thread returns a thread's posts, oldest first (GET /posts/{id}/thread;
// the order of order is not relied on).
func (c *Client) Thread(ctx context.Context, root string) ([]*Post, error) {
	if !gatewayd.ValidID(root) {
		return nil, fmt.Errorf("thread: bad id %q", root)
	}
	var l PostList
	if err := c.do(ctx, "thread", http.MethodGet, "/posts/"+root+"/thread", nil, nil, &l); err != nil {
		return nil, err
	}
	return sorted(l.checked()), nil
}

// SinceCap is how many posts one since query returns at most:
// SqlPostStore.GetPostsSince (server/channels/store/sqlstore/
// post_store.go) selects "UpdateAt > ? AND ChannelId = ? LIMIT 1000",
// plus the roots of those posts (a UNION), and the handler has no page
// parameter for since.
const SinceCap = 1000

// maxSincePages bounds one gap fetch: past it the gap is refused, not
// fetched without end.
const maxSincePages = 50

// PostsSince returns a channel's posts created or changed after since
// (ms epoch), oldest first (GET /channels/{id}/posts?since=). A server
// answers at most [SinceCap] per query, so while a page is full it asks
// again from the newest update_at it got, less 1 ms (posts sharing that
// millisecond are asked for again; ids are merged), until a page comes
// back short. [I]: the query's LIMIT has no ORDER BY; with the index on
// (ChannelId, UpdateAt) the database returns the oldest first, which
// this paging relies on.
func (c *Client) PostsSince(ctx context.Context, channel string, since int64) ([]*Post, error) {
	if !gatewayd.ValidID(channel) {
		return nil, fmt.Errorf("posts since: bad channel id %q", channel)
	}
	// api4/post.go getPostsForChannel reads since only when it is above
	// 0; otherwise it answers a page of the channel's newest posts, which
	// is not "every post since": ask from 1 ms instead, the same set.
	since = max(since, 1)
	got := map[string]*Post{}
	for page := 0; ; page++ {
		if page == maxSincePages {
			return nil, fmt.Errorf("posts since: over %d posts changed in channel %s; the gap is not fetched", maxSincePages*SinceCap, channel)
		}
		var l PostList
		q := url.Values{"since": {strconv.FormatInt(since, 10)}}
		if err := c.do(ctx, "posts since", http.MethodGet, "/channels/"+channel+"/posts", q, nil, &l); err != nil {
			return nil, err
		}
		n, fresh, newest := 0, 0, since
		for _, p := range l.checked() {
			if p.ChannelID != channel {
				continue
			}
			if p.UpdateAt > since {
				n++
				newest = max(newest, p.UpdateAt)
			}
			if got[p.ID] == nil {
				fresh++
			}
			got[p.ID] = p
		}
		if n < SinceCap {
			break
		}
		if fresh == 0 {
			return nil, fmt.Errorf("posts since: over %d posts changed within one millisecond in channel %s; the gap is not fetched", SinceCap, channel)
		}
		since = newest - 1
	}
	out := make([]*Post, 0, len(got))
	for _, p := range got {
		out = append(out, p)
	}
	return sorted(out), nil
}
