package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	mm "wntrmute.dev/boxmaker/checks/fake/mattermost"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	session "wntrmute.dev/boxmaker/pkg/logs/sessionlog"
)

// The soak's kinds of turn, by the turn's number n: every fourth turn
// from 1 is posted in Mattermost thread A, every fourth from 3 in thread
// B (the rest through bxctl chat); every eighth from 1 reads a file under
// an ask grant, so brokerd posts an approval in the thread, which the
// owner answers there; every third calls recall.
func soakInMattermost(n int) (bool, int) { return n%4 == 1 || n%4 == 3, n % 4 / 2 }
func soakAsks(n int) bool                { return n%8 == 1 }

// soakAskCall is the call an approval turn makes.
const soakAskCall = `{"name":"read_file","arguments":{"path":"/home/owner/Downloads/soak.txt"}}`

// soakChat is the soak's Mattermost: the fake with the bot and the owner,
// gatewayd's config (the owner may talk and approve), the ask grant, the
// two threads' roots, and the owner who answers every approval post once
// with its code.
type soakChat struct {
	*chatRig
	mu       sync.Mutex
	roots    [2]string
	answered map[string]bool // approval ids the owner answered
}

func newSoakChat(t *testing.T, state string) *soakChat {
	c := &soakChat{chatRig: newChatRig(t), answered: map[string]bool{}}
	cfg := fmt.Sprintf("url = %q\ntoken = \"env:BOXMAKER_TEST_MM_TOKEN\"\n\n[allow]\nusers = [%q]\n\n[approvals]\nusers = [%q]\n",
		c.mm.URL(), c.owner.ID, c.owner.ID)
	require.NoError(t, os.WriteFile(layout.ConfigPath(state, "gatewayd"), []byte(cfg), 0o600))
	require.NoError(t, os.MkdirAll(layout.Grants.In(state), 0o750))
	require.NoError(t, os.WriteFile(filepath.Join(layout.Grants.In(state), "downloads.toml"), []byte(gatewayGrants), 0o600))
	return c
}

// post sends turn n's message in its thread (the first of a thread is
// its root) and returns the thread's root.
func (c *soakChat) post(t *testing.T, n, thread int) string {
	c.mu.Lock()
	root := c.roots[thread]
	c.mu.Unlock()
	p, err := c.mm.PostAs(c.owner.ID, mm.Post{ChannelID: c.dm, RootID: root, Message: fmt.Sprintf("soak turn %d", n)})
	require.NoError(t, err)
	if root == "" {
		c.mu.Lock()
		c.roots[thread] = p.ID
		c.mu.Unlock()
		root = p.ID
	}
	return root
}

// answered waits up to d for turn n's answer in thread root.
func (c *soakChat) answeredIn(root string, n int, d time.Duration) bool {
	want := fmt.Sprintf("Answer %d.", n)
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		for _, p := range c.botPosts(root) {
			if strings.Contains(p.Message, want) {
				return true
			}
		}
	}
	return false
}

var (
	soakApproval = regexp.MustCompile(`\*\*Approval (\d+)\*\*, part 1 of 1`)
	soakCode     = regexp.MustCompile("`!approve ([0-9]+) ([0-9a-z]{6})`")
	// soakApprovalPost is an approval post, live or struck through once
	// answered (gatewayd approval.go edits it so).
	soakApprovalPost = regexp.MustCompile(`(?:\*\*|~~)Approval (\d+)(?:\*\*,|~~) \(?part 1 of 1`)
)

// approve is the owner: every approval post in the threads is answered
// once, in its thread, with the code it shows, until stop.
func (c *soakChat) approve(t *testing.T, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
		c.mu.Lock()
		roots := c.roots
		c.mu.Unlock()
		for _, root := range roots {
			if root == "" {
				continue
			}
			for _, p := range c.botPosts(root) {
				m := soakCode.FindStringSubmatch(p.Message)
				if m == nil || soakApproval.FindStringSubmatch(p.Message) == nil || c.answered[m[1]] {
					continue
				}
				c.answered[m[1]] = true
				if _, err := c.mm.PostAs(c.owner.ID, mm.Post{ChannelID: c.dm, RootID: root, Message: "!approve " + m[1] + " " + m[2]}); err != nil {
					t.Errorf("the owner's answer to approval %s: %v", m[1], err)
				}
			}
		}
	}
}

// check holds the Mattermost side of the soak's invariants: no answer
// and no approval is posted twice; every ended turn of a thread's
// session is posted in its thread, its answer or, if it was stopped or
// interrupted, its stop message (gatewayd delivers what ended while it
// was down when it starts again); it returns the figures.
func (c *soakChat) check(t *testing.T, state string) (answers, approvals int) {
	t.Helper()
	c.mu.Lock()
	roots := c.roots
	c.mu.Unlock()
	for _, root := range roots {
		if root == "" {
			continue
		}
		id := "mm-" + root
		logged, stops := turnOutcomes(t, state, id)
		var posts []mm.Post
		for i := 0; ; i++ {
			posts = c.botPosts(root)
			missing := 0
			for _, want := range append(slices.Clone(logged), stops...) {
				if !slices.ContainsFunc(posts, func(p mm.Post) bool { return strings.Contains(p.Message, want) }) {
					missing++
				}
			}
			if missing == 0 {
				break
			}
			if i > 1500 {
				t.Fatalf("thread %s: %d answered turns never posted", root, missing)
			}
			time.Sleep(20 * time.Millisecond)
		}
		seen := map[string]bool{}
		for _, p := range posts {
			for _, key := range append(soakAnswer.FindAllString(p.Message, -1), approvalKey(p.Message)...) {
				require.False(t, seen[key], "thread %s: %q posted twice", root, key)
				seen[key] = true
				if strings.HasPrefix(key, "Answer") {
					answers++
				} else {
					approvals++
				}
			}
		}
	}
	return answers, approvals
}

func approvalKey(msg string) []string {
	if m := soakApprovalPost.FindStringSubmatch(msg); m != nil {
		return []string{"approval " + m[1]}
	}
	return nil
}

// turnOutcomes are the outcomes session id's logs hold of its ended
// turns, as loopd's answers_since reads them (server/answers.go
// finished): a stopped turn's stop message, else its last answer. Each
// is what gatewayd must post in the thread, once.
func turnOutcomes(t *testing.T, state, id string) (answers, stops []string) {
	t.Helper()
	files, err := session.Files(layout.Sessions.In(state))
	require.NoError(t, err)
	type outcome struct {
		text    string
		stopped bool
	}
	last := map[int64]outcome{}
	for _, f := range files {
		if filepath.Base(filepath.Dir(f)) != id {
			continue
		}
		require.NoError(t, session.Scan(f, func(_ int, r session.Record, _ session.Trust) error {
			switch v := r.(type) {
			case *session.Assistant:
				if len(v.Message.ToolCalls) == 0 && !last[v.Turn].stopped {
					last[v.Turn] = outcome{text: v.Message.Content}
				}
			case *session.Stopped:
				last[v.Turn] = outcome{text: v.Msg, stopped: true}
			case *session.TurnEnd:
				if o, ok := last[v.Turn]; ok {
					if o.stopped {
						stops = append(stops, plainPrefix(o.text))
					} else {
						answers = append(answers, soakAnswer.FindAllString(o.text, -1)...)
					}
				}
			}
			return nil
		}))
	}
	return answers, stops
}

// plainPrefix is the start of a stop message that rendering leaves as
// it is: letters, digits, blanks and commas, at most 30 bytes.
func plainPrefix(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool {
		return !(r == ' ' || r == ',' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	})
	if i < 0 {
		i = len(s)
	}
	return s[:min(i, 30)]
}

var soakAnswer = regexp.MustCompile(`Answer [0-9]+\.`)
