package mattermost

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/gatewayd"
)

const (
	pid = "xxxxxxxxxxxxxxxxxxxxxxxxxx"
	uid = "uuuuuuuuuuuuuuuuuuuuuuuuuu"
	cid = "cccccccccccccccccccccccccc"
)

func postedEvent(post, extra string) []byte {
	p, _ := json.Marshal(post)
	return []byte(`{"event":"posted","data":{"channel_type":"D","post":` + string(p) + extra + `},"broadcast":{"channel_id":"` + cid + `"},"seq":3}`)
}

func TestParsePosted(t *testing.T) {
	good := `{"id":"` + pid + `","user_id":"` + uid + `","channel_id":"` + cid + `","root_id":"","message":"hi","type":"","create_at":5,"props":{"from_bot":"true"},"metadata":{"x":1}}`
	e, err := ParseEvent(postedEvent(good, `,"mentions":"[\"`+uid+`\"]"`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParsePosted(e)
	if err != nil || p.Post.Message != "hi" || p.ChannelType != "D" || len(p.Mentions) != 1 || p.Post.Thread() != pid {
		t.Fatalf("ParsePosted = %+v, %v", p, err)
	}
	for _, tt := range []struct{ name, ev string }{
		{"post not a string", `{"event":"posted","data":{"channel_type":"D","post":{"id":"x"}},"seq":1}`},
		{"bad id", string(postedEvent(strings.Replace(good, pid, "../../etc", 1), ""))},
		{"bad root", string(postedEvent(strings.Replace(good, `"root_id":""`, `"root_id":"x"`, 1), ""))},
		{"bad channel type", strings.Replace(string(postedEvent(good, "")), `"channel_type":"D"`, `"channel_type":"Z"`, 1)},
		{"mentions not a string", string(postedEvent(good, `,"mentions":["x"]`))},
		{"post not JSON", `{"event":"posted","data":{"channel_type":"D","post":"{"},"seq":1}`},
	} {
		e, err := ParseEvent([]byte(tt.ev))
		if err != nil {
			continue
		}
		if _, err := ParsePosted(e); err == nil {
			t.Errorf("%s: ParsePosted accepted %s", tt.name, tt.ev)
		}
	}
	if _, err := ParseEvent([]byte(`{"event":"hello","seq":-1}`)); err == nil {
		t.Error("negative seq accepted")
	}
}

func TestSplit(t *testing.T) {
	for _, tt := range []struct {
		in   string
		max  int
		want []string
	}{
		{"abc", 5, []string{"abc"}},
		{"abcdef", 3, []string{"abc", "def"}},
		{"abcdefg\nhij", 10, []string{"abcdefg\n", "hij"}},
		{"日本語日本語", 4, []string{"日本語日", "本語"}},
		{"", 4, []string{""}},
	} {
		got := Split(tt.in, tt.max)
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("Split(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}

func FuzzParseEvent(f *testing.F) {
	f.Add(postedEvent(`{"id":"`+pid+`","user_id":"`+uid+`","channel_id":"`+cid+`","message":"hi"}`, ""))
	f.Add([]byte(`{"event":"hello","data":{"connection_id":"abc","server_version":"1"},"seq":0}`))
	f.Add([]byte(`{"status":"OK","seq_reply":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseEvent(b)
		if err != nil {
			return
		}
		if e.Seq < 0 {
			t.Fatal("negative seq")
		}
		if h, err := ParseHello(e); err == nil && (h.ConnectionID == "" || len(h.ConnectionID) > 64) {
			t.Fatal("bad hello accepted")
		}
		p, err := ParsePosted(e)
		if err != nil {
			return
		}
		if !gatewayd.ValidID(p.Post.ID) || !gatewayd.ValidID(p.Post.UserID) || !gatewayd.ValidID(p.Post.ChannelID) || (p.Post.RootID != "" && !gatewayd.ValidID(p.Post.RootID)) {
			t.Fatalf("unchecked ids in %+v", p.Post)
		}
		if !gatewayd.ValidID(p.Post.Thread()) {
			t.Fatal("bad thread id")
		}
	})
}

func FuzzParsePost(f *testing.F) {
	f.Add([]byte(`{"id":"` + pid + `","user_id":"` + uid + `","channel_id":"` + cid + `","message":"hi","create_at":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePost(b)
		if err != nil {
			return
		}
		if !gatewayd.ValidID(p.ID) || p.CreateAt < 0 {
			t.Fatalf("accepted %+v", p)
		}
	})
}

func FuzzSplit(f *testing.F) {
	f.Add("hello world\nagain", 4)
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max < 1 || max > 100 {
			return
		}
		parts := Split(s, max)
		if strings.Join(parts, "") != s {
			t.Fatal("lost text")
		}
		for _, p := range parts {
			if utf8.RuneCountInString(p) > max {
				t.Fatal("part too long")
			}
			if utf8.ValidString(s) && !utf8.ValidString(p) {
				t.Fatal("split inside a rune")
			}
		}
	})
}
