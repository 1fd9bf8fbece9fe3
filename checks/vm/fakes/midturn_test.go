package fakes

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	llama "wntrmute.dev/boxmaker/checks/fake/llama"
	mm "wntrmute.dev/boxmaker/checks/fake/mattermost"
	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// midTurnScript is what the fake model answers role's check with, one
// reply per request of that session. gatewayd, loopd and inferproxy die
// while the model's answer is held mid-stream; brokerd and memoryd while
// the turn's recall call is under way in them, so the model is asked
// twice: for the call (held, so that the test stops memoryd before the
// call reaches it), then for the answer.
func midTurnScript(role string, release <-chan struct{}) []llama.Reply {
	switch role {
	case layout.Brokerd, layout.Memoryd:
		return []llama.Reply{
			{Reasoning: "Recall first.", ToolCalls: []llama.ToolCall{{Name: "recall", Arguments: `{"query":"mid-turn"}`}}, StallAfter: HoldAfter, Hold: release},
			{Reasoning: "Answer now.", Content: MidTurnAnswer(role)},
		}
	}
	return []llama.Reply{{Reasoning: "Take time.", Content: MidTurnAnswer(role), StallAfter: HoldAfter, Hold: release}}
}

// midTurn serves the mid-turn kill check's files (see [Go]) in dir until
// the test ends.
func midTurn(t *testing.T, dir string, srv *llama.Server, fmm *mm.Server, bot, owner, dm string) {
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name+".tmp"), b, 0o600); err != nil {
			t.Error(err)
		}
		if err := os.Rename(filepath.Join(dir, name+".tmp"), filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(dir, name))
		return err == nil
	}
	var mu sync.Mutex
	served := map[string]int{}
	scripts := map[string][]llama.Reply{}
	for _, r := range layout.Daemons {
		release := make(chan struct{})
		scripts[r] = midTurnScript(r, release)
		go func() {
			for !exists(Release(r)) {
				time.Sleep(100 * time.Millisecond)
			}
			close(release)
		}()
	}
	srv.Respond(func(body []byte) (llama.Reply, bool) {
		role := checkOf(body)
		if role == "" {
			return llama.Reply{}, false
		}
		mu.Lock()
		defer mu.Unlock()
		n := served[role]
		served[role]++
		write(Served(role), []byte(fmt.Sprint(served[role])))
		if n < len(scripts[role]) {
			return scripts[role][n], true
		}
		// A request the check did not expect (a retried turn) answers
		// so that the thread shows it.
		return llama.Reply{Reasoning: "Unexpected.", Content: fmt.Sprintf("unexpected request %d of the %s check", n+1, role)}, true
	})
	for _, r := range layout.Daemons {
		go func() {
			for !exists(Go(r)) {
				time.Sleep(100 * time.Millisecond)
			}
			p, err := fmm.PostAs(owner, mm.Post{ChannelID: dm, Message: MidTurnMessage(r)})
			if err != nil {
				write(Root(r), []byte("post: "+err.Error()))
				return
			}
			write(Root(r), []byte(p.ID))
			last := ""
			for {
				posts := []Post{}
				for _, q := range fmm.Thread(p.ID) {
					if q.UserID == bot {
						turn, _ := q.Props["boxmaker_turn"].(string)
						posts = append(posts, Post{Message: q.Message, Turn: turn})
					}
				}
				if b, _ := json.Marshal(posts); string(b) != last {
					write(Posts(r), b)
					last = string(b)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}()
	}
}

// checkOf is the role whose check a chat request belongs to: the one
// whose message a user message of the request holds (tool results, where
// a recall could quote another check's, are not user messages), or "".
func checkOf(body []byte) string {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return ""
	}
	for _, m := range req.Messages {
		if m.Role != "user" {
			continue
		}
		for _, r := range layout.Daemons {
			if strings.Contains(string(m.Content), MidTurnMessage(r)) {
				return r
			}
		}
	}
	return ""
}
