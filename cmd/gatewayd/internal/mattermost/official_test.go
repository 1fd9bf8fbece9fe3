package mattermost

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/clients"
	fake "wntrmute.dev/boxmaker/checks/fake/mattermost"
)

// officialOp is one operation the official client performs
// (checks/clients/mattermost.js).
type officialOp struct {
	Op   string `json:"op"`
	Call string `json:"call"`
	Args []any  `json:"args,omitempty"`
}

type officialResult struct {
	Op    string          `json:"op"`
	OK    bool            `json:"ok"`
	Data  json.RawMessage `json:"data"`
	Error struct {
		ServerErrorID string `json:"server_error_id"`
		StatusCode    int    `json:"status_code"`
	} `json:"error"`
}

type officialRun struct {
	Results []officialResult  `json:"results"`
	Events  []json.RawMessage `json:"events"`
}

// queryDefaults are the query parameters Client4 adds at the value the
// server takes when they are absent: api4/post.go getPostsForChannel and
// getPostThread read skipFetchThreads, collapsedThreads and
// collapsedThreadsExtended as `== "true"`, and getPostThread's direction
// defaults to "down" (docs/clients.md).
var queryDefaults = clients.Defaults{"skipFetchThreads": "false", "collapsedThreads": "false",
	"collapsedThreadsExtended": "false", "direction": "down"}

// restOps maps each REST operation of [Client] to the official call that
// performs it; [TestOfficialCoverage] holds this table to the client's
// exported methods.
var restOps = map[string]string{
	"Me": "getMe", "CreatePost": "createPost", "CreatePostProp": "createPost", "PatchMessage": "patchPost",
	"GetPost": "getPost", "DirectChannel": "createDirectChannel", "Thread": "getPostThread",
	"PostsSince": "getPostsSince", "Typing": "userTyping (WebSocket action)",
	"FileInfosForPost": "getFileInfosForPost", "Download": "fetch(getFileUrl) (the web app's download)",
	"UploadFile": "uploadFile", "CreatePostFiles": "createPost",
}

// TestOfficialClient runs gatewayd's client and @mattermost/client's
// Client4 and WebSocketClient against the same fake, operation by
// operation, and holds gatewayd's requests to the official client's
// (method, path, query and body shape) and the fake's answers to
// @mattermost/types.
func TestOfficialClient(t *testing.T) {
	clients.Modules(t)
	srv := fake.New(t)
	bot := srv.AddUser("boxmaker", true)
	owner := srv.AddUser("owner", false)
	dm := srv.Direct(bot.ID, owner.ID)
	file, err := srv.Upload(owner.ID, dm, "notes.txt", []byte("some notes\n"))
	if err != nil {
		t.Fatal(err)
	}
	root, err := srv.PostAs(owner.ID, fake.Post{ChannelID: dm, Message: "hello @boxmaker", FileIDs: []string{file.ID}})
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, srv, bot.Token)
	ctx := context.Background()

	ours := map[string][]fake.Request{}
	mark := func(op string, f func() error) {
		t.Helper()
		n := len(srv.Recorded())
		if err := f(); err != nil {
			t.Fatalf("gatewayd %s: %v", op, err)
		}
		ours[op] = srv.Recorded()[n:]
	}
	var mine *Post
	mark("Me", func() error { _, err := c.Me(ctx); return err })
	mark("CreatePostProp", func() (err error) {
		mine, err = c.CreatePostProp(ctx, dm, root.ID, "answer", "boxmaker_turn", "t1")
		return err
	})
	mark("CreatePost", func() error { _, err := c.CreatePost(ctx, dm, root.ID, "more"); return err })
	mark("PatchMessage", func() error { return c.PatchMessage(ctx, mine.ID, "edited") })
	mark("GetPost", func() error { _, err := c.GetPost(ctx, mine.ID); return err })
	mark("DirectChannel", func() error { _, err := c.DirectChannel(ctx, bot.ID, owner.ID); return err })
	mark("Thread", func() error { _, err := c.Thread(ctx, root.ID); return err })
	mark("PostsSince", func() error { _, err := c.PostsSince(ctx, dm, root.CreateAt-1); return err })
	mark("Typing", func() error { return c.Typing(ctx, dm, root.ID) })
	mark("FileInfosForPost", func() error {
		infos, err := c.FileInfosForPost(ctx, root.ID)
		if err == nil && (len(infos) != 1 || infos[file.ID] == nil || infos[file.ID].Name != "notes.txt") {
			err = fmt.Errorf("read as %v", infos)
		}
		return err
	})
	var upID string
	mark("UploadFile", func() (err error) {
		upID, err = c.UploadFile(ctx, dm, "report.csv", []byte("a,b\n1,2\n"))
		return err
	})
	mark("CreatePostFiles", func() error {
		p, err := c.CreatePostFiles(ctx, dm, root.ID, "here it is", "", "", []string{upID})
		if err == nil && (len(p.FileIDs) != 1 || p.FileIDs[0] != upID) {
			err = fmt.Errorf("the post holds %v", p.FileIDs)
		}
		return err
	})
	mark("Download", func() error {
		var b strings.Builder
		_, err := c.Download(ctx, file.ID, 1<<20, &b)
		if err == nil && b.String() != "some notes\n" {
			err = fmt.Errorf("downloaded %q", b.String())
		}
		return err
	})

	props := map[string]any{PropUnsafeLinks: "true", "boxmaker_turn": "t1"}
	newPost := map[string]any{"channel_id": dm, "root_id": root.ID, "message": "answer", "props": props, "file_ids": []string{}}
	ops := []officialOp{
		{"Me", "getMe", nil},
		{"CreatePostProp", "createPost", []any{newPost}},
		{"CreatePost", "createPost", []any{map[string]any{"channel_id": dm, "root_id": root.ID, "message": "more", "props": map[string]any{PropUnsafeLinks: "true"}, "file_ids": []string{}}}},
		{"CreatePostFiles", "createPost", []any{map[string]any{"channel_id": dm, "root_id": root.ID, "message": "here it is", "props": map[string]any{PropUnsafeLinks: "true"}, "file_ids": []string{"zzzzzzzzzzzzzzzzzzzzzzzzzz"}}}},
		{"PatchMessage", "patchPost", []any{map[string]any{"id": mine.ID, "message": "edited"}}},
		{"GetPost", "getPost", []any{mine.ID}},
		{"DirectChannel", "createDirectChannel", []any{[]string{bot.ID, owner.ID}}},
		{"Thread", "getPostThread", []any{root.ID}},
		{"PostsSince", "getPostsSince", []any{dm, root.CreateAt - 1}},
		{"getPosts", "getPosts", []any{dm, 0, 2}},
		{"FileInfosForPost", "getFileInfosForPost", []any{root.ID}},
		{"Download", "getFile", []any{file.ID}},
		{"UploadFile", "uploadFile", []any{dm, "report.csv", "a,b\n1,2\n"}},
		{"connect", "connect", nil},
		{"Typing", "userTyping", []any{dm, root.ID}},
		{"owner posts", "waitEvents", []any{1}},
	}
	var run officialRun
	// The owner's post while the official client listens: its posted
	// event is checked against the official types below.
	go func() {
		for i := 0; srv.Connections() == 0; i++ {
			if i == 1000 {
				return // the official client never connected; the test says so
			}
			time.Sleep(20 * time.Millisecond)
		}
		srv.PostAs(owner.ID, fake.Post{ChannelID: dm, RootID: root.ID, Message: "a reply"})
	}()
	ops = append(ops, officialOp{"events", "waitEvents", []any{2}}, officialOp{"close", "close", nil})
	clients.Run(t, "mattermost.js", map[string]any{"url": srv.URL(), "token": bot.Token, "ops": ops}, &run)
	theirs := map[string][]fake.Request{}
	for _, r := range srv.Recorded() {
		if r.Op != "" {
			theirs[r.Op] = append(theirs[r.Op], r)
		}
	}
	answers := map[string]json.RawMessage{}
	for _, r := range run.Results {
		if !r.OK {
			t.Errorf("official %s failed: %+v", r.Op, r.Error)
		}
		answers[r.Op] = r.Data
	}

	for method := range restOps {
		t.Run(method, func(t *testing.T) {
			got := theirs[method]
			if method == "Typing" {
				got = theirs["connect"] // the action goes on the socket of the connect op
			}
			compareMM(t, method, ours[method], got)
		})
	}

	checks := []clients.TypeCheck{
		{Label: "getMe", Type: "WireUser", Value: answers["Me"]},
		{Label: "createPost", Type: "WirePost", Value: answers["CreatePostProp"]},
		{Label: "patchPost", Type: "WirePost", Value: answers["PatchMessage"]},
		{Label: "getPost", Type: "WirePost", Value: answers["GetPost"]},
		{Label: "createDirectChannel", Type: "WireChannel", Value: answers["DirectChannel"]},
		{Label: "getPostThread", Type: "WirePostList", Value: answers["Thread"]},
		{Label: "getPostsSince", Type: "WirePostList", Value: answers["PostsSince"]},
		{Label: "getPosts", Type: "WirePostList", Value: answers["getPosts"]},
		{Label: "getFileInfosForPost", Type: "WireFileInfo[]", Value: answers["FileInfosForPost"]},
		{Label: "uploadFile", Type: "Omit<FileUploadResponse, 'file_infos'> & {file_infos: WireFileInfo[]}", Value: answers["UploadFile"]},
		// Client4's request bodies, as gatewayd sends them, fit the
		// official client's parameter types.
		{Label: "gatewayd's create post body", Type: "Parameters<Client4['createPost']>[0]", Value: ours["CreatePostProp"][0].Body},
		{Label: "gatewayd's direct channel body", Type: "Parameters<Client4['createDirectChannel']>[0]", Value: ours["DirectChannel"][0].Body},
	}
	kinds := map[string]int{}
	for _, e := range run.Events {
		var ev struct {
			Event string          `json:"event"`
			Data  json.RawMessage `json:"data"`
		}
		json.Unmarshal(e, &ev)
		kinds[ev.Event]++
		switch ev.Event {
		case "hello":
			checks = append(checks, clients.TypeCheck{Label: "hello event", Type: "WireEvent<Hello>", Value: e})
		case "posted":
			checks = append(checks, clients.TypeCheck{Label: "posted event", Type: "WireEvent<Posted>", Value: e})
			// gatewayd reads the very event the official client got.
			pe, err := ParseEvent(e)
			if err == nil {
				var p *Posted
				if p, err = ParsePosted(pe); err == nil && (p.Post.Message != "a reply" || p.ChannelType != ChannelDirect || len(p.Mentions) != 1 || p.Mentions[0] != bot.ID) {
					err = fmt.Errorf("read as %+v", p)
				}
			}
			if err != nil {
				t.Errorf("gatewayd cannot read the posted event the official client got: %v", err)
			}
			var d struct{ Post string }
			json.Unmarshal(ev.Data, &d)
			checks = append(checks, clients.TypeCheck{Label: "posted event's data.post", Type: "WirePost", Value: json.RawMessage(d.Post)})
		}
	}
	if kinds["hello"] != 1 || kinds["posted"] != 1 {
		t.Errorf("the official WebSocketClient saw events %v, want one hello and one posted", kinds)
	}
	clients.CheckTypes(t, mmPrelude, checks)

	// The WebSocket: the official client authenticates by challenge and
	// sends user_typing over the socket; gatewayd uses the header and the
	// REST typing call (both are the server's; docs/clients.md).
	upgrades := 0
	for _, r := range theirs["connect"] {
		if r.Method == "GET" {
			upgrades++
			if r.Auth != "" || clients.QueryShape(r.RawQuery) != "connection_id=string&sequence_number=number" {
				t.Errorf("official upgrade: auth %q query %q", r.Auth, r.RawQuery)
			}
		}
	}
	if upgrades != 1 {
		t.Errorf("the official client connected %d times, want once (a reconnect means it refused the fake's sequence)", upgrades)
	}
}

// compareMM holds gatewayd's requests for one operation to the official
// client's: the same number, and each the same method, path, query
// shape (less [queryDefaults]) and body shape. Typing is a REST call in
// gatewayd and a WebSocket action in the official client: their bodies
// (data) are compared.
func compareMM(t *testing.T, op string, ours, theirs []fake.Request) {
	t.Helper()
	var mine []fake.Request
	for _, r := range theirs {
		if r.Method != "GET" || r.Path != "/api/v4/websocket" {
			mine = append(mine, r)
		}
	}
	theirs = mine
	if op == "Typing" {
		theirs = nil
		for _, r := range mine {
			if r.Method == "WS" && r.Path == "user_typing" {
				theirs = append(theirs, r)
			}
		}
	}
	if len(ours) != 1 || len(theirs) != 1 {
		t.Fatalf("%s: gatewayd made %d requests, the official client %d; want one each", op, len(ours), len(theirs))
	}
	o, f := ours[0], theirs[0]
	if o.Auth != "bearer" {
		t.Errorf("%s: gatewayd authenticated by %q, want the Bearer header", op, o.Auth)
	}
	if op != "Typing" && (o.Method != f.Method || o.Path != f.Path) {
		t.Errorf("%s: gatewayd %s %s, official %s %s", op, o.Method, o.Path, f.Method, f.Path)
	}
	oq, fq := clients.QueryShape(queryDefaults.Without(o.RawQuery)), clients.QueryShape(queryDefaults.Without(f.RawQuery))
	if oq != fq {
		t.Errorf("%s: gatewayd query %q (%s), official %q (%s)", op, o.RawQuery, oq, f.RawQuery, fq)
	}
	if op == "UploadFile" {
		// A multipart body: the parts in order, not JSON.
		if om, fm := clients.MultipartShape(o.Body), clients.MultipartShape(f.Body); om != fm || om != "channel_id,files(file)" {
			t.Errorf("%s: gatewayd parts %s, official parts %s", op, om, fm)
		}
		return
	}
	fb := f.Body
	if op == "PatchMessage" {
		// Client4.patchPost puts the post's id in the body too;
		// api4/post.go patchPost decodes a model.PostPatch, which has no
		// id, and takes the id from the path.
		fb = without(t, fb, "id")
	}
	if os, fs := clients.Shape(o.Body), clients.Shape(fb); os != fs {
		t.Errorf("%s: gatewayd body %s\nofficial body %s", op, os, fs)
	}
}

func without(t *testing.T, b []byte, key string) []byte {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, key)
	out, _ := json.Marshal(m)
	return out
}

// mmPrelude imports the official types and loosens them exactly where
// the server's Go model omits or nulls a field the TypeScript declares
// (docs/clients.md): model/post_metadata.go tags every PostMetadata field
// omitempty; model/user.go tags password, props, notify_props,
// last_password_update, last_picture_update, mfa_active,
// last_activity_at, is_bot, bot_description and terms_of_service_*
// omitempty; model/channel.go has scheme_id, group_constrained, shared
// and props as a pointer or map, null when unset; model.WebsocketBroadcast's
// omit_users is a map, null when unset; model/file_info.go tags width,
// height and has_preview_image omitempty and mini_preview a *[]byte
// without it (null when unset), and FileInfo's clientId is the web app's
// own, never the server's. An event's name is compared as
// the string the WebSocketEvents enum stands for.
const mmPrelude = `
import type {Post, PostList, PostMetadata} from '@mattermost/types/posts';
import type {UserProfile} from '@mattermost/types/users';
import type {Channel} from '@mattermost/types/channels';
import type {Hello, Posted} from '@mattermost/client/lib/websocket_messages';
import type {WebSocketBroadcast} from '@mattermost/client/lib/websocket_message';
import type {Client4} from '@mattermost/client';
import type {FileInfo, FileUploadResponse} from '@mattermost/types/files';
type Loose<T, K extends keyof T> = Omit<T, K> & Partial<Pick<T, K>>;
type WirePost = Omit<Post, 'metadata'> & {metadata: Partial<PostMetadata>};
type WireFileInfo = Omit<Loose<FileInfo, 'width' | 'height' | 'has_preview_image' | 'clientId'>, 'mini_preview'> & {mini_preview?: string | null};
type WirePostList = Omit<PostList, 'posts'> & {posts: Record<string, WirePost>};
type WireUser = Loose<UserProfile, 'password' | 'props' | 'notify_props' | 'last_password_update' | 'last_picture_update' | 'mfa_active' | 'last_activity_at' | 'is_bot' | 'bot_description' | 'terms_of_service_id' | 'terms_of_service_create_at'>;
type WireChannel = Omit<Channel, 'scheme_id' | 'group_constrained' | 'props' | 'shared'> & {scheme_id: string | null; group_constrained: boolean | null; props: Record<string, any> | null; shared: boolean | null};
type WireEvent<E extends {event: string; broadcast: WebSocketBroadcast}> = Omit<E, 'event' | 'broadcast'> & {event: ` + "`${E['event']}`" + `; broadcast: Omit<WebSocketBroadcast, 'omit_users'> & {omit_users: Record<string, boolean> | null}};
`

// TestOfficialCoverage fails when gatewayd's client can make a request
// no official call is compared with: every exported method of Client
// and Stream is in restOps or wsOps.
func TestOfficialCoverage(t *testing.T) {
	wsOps := map[string]string{"Run": "WebSocketClient.initialize (connect)"}
	for recv, table := range map[string]map[string]string{"Client": restOps, "Stream": wsOps} {
		ms, err := clients.Methods(".", recv)
		if err != nil || len(ms) == 0 {
			t.Fatalf("methods of %s: %v %v", recv, ms, err)
		}
		for _, m := range ms {
			if _, ok := table[strings.TrimPrefix(m, recv+".")]; !ok {
				t.Errorf("%s performs requests no official-client operation is compared with: add it to TestOfficialClient", m)
			}
		}
	}
}
