package stack

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	mm "wntrmute.dev/boxmaker/checks/fake/mattermost"
	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// chatRig is a fake Mattermost with the bot and its owner, for the tests
// that run gatewayd.
type chatRig struct {
	mm         *mm.Server
	bot, owner mm.User
	dm         string
}

func newChatRig(t *testing.T) *chatRig {
	fmm := mm.New(t)
	bot := fmm.AddUser("boxmaker", true)
	owner := fmm.AddUser("owner", false)
	return &chatRig{mm: fmm, bot: bot, owner: owner, dm: fmm.Direct(bot.ID, owner.ID)}
}

// writeGatewayConfig writes state's gatewayd.toml: the fake's URL, the
// bot token from $BOXMAKER_TEST_MM_TOKEN (tokenEnv), the owner allowed.
func (c *chatRig) writeGatewayConfig(t *testing.T, state string, mode os.FileMode) {
	t.Helper()
	cfg := fmt.Sprintf("url = %q\ntoken = \"env:BOXMAKER_TEST_MM_TOKEN\"\n\n[allow]\nusers = [%q]\n", c.mm.URL(), c.owner.ID)
	require.NoError(t, os.WriteFile(layout.ConfigPath(state, "gatewayd"), []byte(cfg), mode))
}

// tokenEnv is the environment gatewayd reads the bot token from.
func (c *chatRig) tokenEnv() []string { return []string{"BOXMAKER_TEST_MM_TOKEN=" + c.bot.Token} }

// connected waits for n WebSocket connections; logs says why not.
func (c *chatRig) connected(t *testing.T, n int, logs func() string) {
	t.Helper()
	for i := 0; c.mm.Connections() < n; i++ {
		if i > 1500 {
			t.Fatalf("gatewayd never connected:\n%s", logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// botPosts are the bot's posts in thread root.
func (c *chatRig) botPosts(root string) []mm.Post {
	var got []mm.Post
	for _, p := range c.mm.Thread(root) {
		if p.UserID == c.bot.ID {
			got = append(got, p)
		}
	}
	return got
}
