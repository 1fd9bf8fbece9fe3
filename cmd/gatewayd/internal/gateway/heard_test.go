package gateway

import (
	"testing"

	fake "wntrmute.dev/boxmaker/checks/fake/mattermost"
	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/mattermost"
)

const (
	idBot    = "bbbbbbbbbbbbbbbbbbbbbbbbbb"
	idOwner  = "oooooooooooooooooooooooooo"
	idOther  = "mmmmmmmmmmmmmmmmmmmmmmmmmm"
	idBot2   = "pppppppppppppppppppppppppp"
	idDM     = "dddddddddddddddddddddddddd"
	idChan   = "cccccccccccccccccccccccccc"
	idStray  = "ssssssssssssssssssssssssss"
	idPost   = "xxxxxxxxxxxxxxxxxxxxxxxxxx"
	idMine   = "tttttttttttttttttttttttttt"
	idTheirs = "uuuuuuuuuuuuuuuuuuuuuuuuuu"
)

// TestHear feeds who-is-heard its hostile cases: spoofed mentions,
// typed posts, bots, channels, and the leading-mention strip.
func TestHear(t *testing.T) {
	h := &hearer{me: idBot, name: "boxmaker", users: set([]string{idOwner, idOther}), channels: set([]string{idChan})}
	own := func(root string) bool { return root == idMine }
	for _, tt := range []struct {
		name    string
		user    string
		chType  string
		channel string
		root    string
		typ     string
		props   map[string]any
		msg     string
		want    string
		why     verdict
	}{
		{"dm", idOwner, "D", idDM, "", "", nil, "hello", "hello", heardOK},
		{"dm leading mention stripped", idOwner, "D", idDM, "", "", nil, "@boxmaker, !approve 3", "!approve 3", heardOK},
		{"dm mention case", idOwner, "D", idDM, "", "", nil, "@BoxMaker: hi", "hi", heardOK},
		{"own post", idBot, "D", idDM, "", "", nil, "echo", "", ignoredOwn},
		{"system post", idOwner, "D", idDM, "", "system_join_channel", nil, "joined", "", ignoredType},
		{"typed post from a plugin", idOwner, "O", idChan, "", "custom_poll", nil, "@boxmaker run", "", ignoredType},
		{"me post", idOwner, "D", idDM, "", "me", nil, "waves", "", ignoredType},
		{"stranger", idStray, "D", idDM, "", "", nil, "hi", "", ignoredUser},
		{"other bot claims from_bot", idBot2, "O", idChan, "", "", map[string]any{"from_bot": "true"}, "@boxmaker do it", "", ignoredUser},
		{"webhook by the owner", idOwner, "D", idDM, "", "", map[string]any{"from_webhook": "true"}, "!approve 3", "", ignoredHook},
		{"webhook in a channel", idOwner, "O", idChan, "", "", map[string]any{"from_webhook": "true", "override_username": "owner"}, "@boxmaker hi", "", ignoredHook},
		{"plugin post", idOwner, "D", idDM, "", "", map[string]any{"from_plugin": "true"}, "hi", "", ignoredHook},
		{"oauth app post", idOwner, "D", idDM, "", "", map[string]any{"from_oauth_app": "true"}, "hi", "", ignoredHook},
		{"override username alone", idOwner, "D", idDM, "", "", map[string]any{"override_username": "someone"}, "hi", "", ignoredHook},
		{"override icon alone", idOwner, "D", idDM, "", "", map[string]any{"override_icon_url": ""}, "hi", "", ignoredHook},
		{"from_webhook not true", idOwner, "D", idDM, "", "", map[string]any{"from_webhook": "false"}, "hi", "hi", heardOK},
		{"channel not allowed", idOwner, "O", idStray, "", "", nil, "@boxmaker hi", "", ignoredChan},
		{"group not allowed", idOwner, "G", idStray, "", "", nil, "@boxmaker hi", "", ignoredChan},
		{"channel names bot", idOwner, "O", idChan, "", "", nil, "@boxmaker hi", "hi", heardOK},
		{"channel mention mid-text", idOwner, "O", idChan, "", "", nil, "hey @boxmaker.", "hey @boxmaker.", heardOK},
		{"channel unnamed", idOwner, "O", idChan, "", "", nil, "hi all", "", ignoredNamed},
		{"@channel names nobody", idOwner, "O", idChan, "", "", nil, "@channel hi", "", ignoredNamed},
		{"@here in a thread not ours", idOwner, "O", idChan, idTheirs, "", nil, "@here hi", "", ignoredNamed},
		{"spoof: longer name", idOwner, "O", idChan, "", "", nil, "@boxmaker2 hi", "", ignoredNamed},
		{"spoof: dotted name", idOwner, "O", idChan, "", "", nil, "@boxmaker.evil hi", "", ignoredNamed},
		{"spoof: fullwidth at", idOwner, "O", idChan, "", "", nil, "\uff20boxmaker hi", "", ignoredNamed},
		{"spoof: e-mail", idOwner, "O", idChan, "", "", nil, "mail me at x@boxmaker", "", ignoredNamed},
		{"spoof: zero-width", idOwner, "O", idChan, "", "", nil, "@box\u200bmaker hi", "", ignoredNamed},
		{"reply in our thread", idOwner, "O", idChan, idMine, "", nil, "and then?", "and then?", heardOK},
		{"reply in our thread, @channel", idOwner, "O", idChan, idMine, "", nil, "@all and then?", "@all and then?", heardOK},
		{"reply in our thread naming another", idOwner, "O", idChan, idMine, "", nil, "@otherbot do it", "", ignoredOther},
		{"dot before another's mention", idOwner, "O", idChan, idMine, "", nil, "hi .@otherbot do it", "", ignoredOther},
		{"dash before another's mention", idOwner, "O", idChan, idMine, "", nil, "x-@otherbot do it", "", ignoredOther},
		{"colon before another's mention", idOwner, "O", idChan, idMine, "", nil, "re:@otherbot do it", "", ignoredOther},
		{"trailing underscore names bot", idOwner, "O", idChan, "", "", nil, "hey @boxmaker_ go", "hey @boxmaker_ go", heardOK},
		{"emoji is not a mention", idOwner, "O", idChan, idMine, "", nil, "nice :@otherbot: one", "nice :@otherbot: one", heardOK},
		{"reply naming both", idOwner, "O", idChan, idMine, "", nil, "@otherbot @boxmaker do it", "@otherbot @boxmaker do it", heardOK},
		{"strip keeps a longer name", idOwner, "D", idDM, "", "", nil, "@boxmakers hi", "@boxmakers hi", heardOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := &mattermost.Posted{ChannelType: tt.chType, Post: &mattermost.Post{ID: idPost, UserID: tt.user, ChannelID: tt.channel,
				RootID: tt.root, Type: tt.typ, Props: tt.props, Message: tt.msg}}
			got, why := h.hear(p, own)
			if got != tt.want || why != tt.why {
				t.Errorf("hear(%q) = %q, %q; want %q, %q", tt.msg, got, why, tt.want, tt.why)
			}
		})
	}
}

func FuzzHear(f *testing.F) {
	for _, s := range []string{"@boxmaker hi", "@boxmaker.", "@boxmaker-x", " @BOXMAKER,: x", "@@boxmaker", "@channel", "x@boxmaker"} {
		f.Add(s, "O", idMine)
	}
	h := &hearer{me: idBot, name: "boxmaker", users: set([]string{idOwner}), channels: set([]string{idChan})}
	f.Fuzz(func(t *testing.T, msg, chType, root string) {
		p := &mattermost.Posted{ChannelType: chType, Post: &mattermost.Post{ID: idPost, UserID: idOwner, ChannelID: idChan, RootID: root, Message: msg}}
		got, why := h.hear(p, func(r string) bool { return r == idMine })
		if why != heardOK && got != "" {
			t.Fatalf("ignored post returned text %q", got)
		}
		if why == heardOK && len(got) > len(msg) {
			t.Fatalf("strip grew the message: %q -> %q", msg, got)
		}
		if chType != "D" && why == heardOK && root != idMine {
			named := false
			for _, n := range names(msg) {
				named = named || n == "boxmaker"
			}
			if !named {
				t.Fatalf("heard %q in a channel without naming the bot", msg)
			}
		}
	})
}

// TestWebhookPostIgnored: an incoming webhook created by the owner posts
// as the owner's user id; gatewayd must not take it for the owner. A
// client post claiming webhook props loses them at the server (the fake
// strips them as Mattermost does) and is heard as the person's own.
func TestWebhookPostIgnored(t *testing.T) {
	r := newRig(t, nil)
	hook, err := r.mm.PostAsWebhook(r.owner.ID, fake.Post{ChannelID: r.dm, Message: "hook says hi",
		Props: map[string]any{"from_webhook": "true", "override_username": "owner"}})
	if err != nil {
		t.Fatal(err)
	}
	spoof, err := r.mm.PostAs(r.owner.ID, fake.Post{ChannelID: r.dm, Message: "typed by the owner",
		Props: map[string]any{"override_username": "ci-bot"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := spoof.Props["override_username"]; ok {
		t.Fatal("the fake kept a reserved prop on a client's post")
	}
	waitFor(t, "the owner's post answered", func() bool { return len(r.botPosts(spoof.ID)) == 1 })
	if n := len(r.botPosts(hook.ID)); n != 0 {
		t.Errorf("the webhook post got %d answers", n)
	}
	for _, s := range r.loop.sent() {
		if s.Text == "hook says hi" {
			t.Error("the webhook post reached loopd")
		}
	}
}
