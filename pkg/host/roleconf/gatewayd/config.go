// Package gatewayd is gatewayd.toml: its keys, defaults and checks, the
// one loader both gatewayd and `bxctl doctor` run, so a config gatewayd
// refuses is never "ok" to the doctor.
//
// Invariant: a Config that [Load] or [Parse] returns has every key
// checked (the token a secret ref, never a token pasted in; every id a
// Mattermost id; every approver heard) and every default filled.
package gatewayd

import (
	"fmt"
	"regexp"
	"strings"

	"wntrmute.dev/boxmaker/pkg/host/config"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/secret"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// Config is gatewayd.toml; deploy/gatewayd.toml is the documented
// example. The bot token is not in it: Token names where the secret
// store finds it.
type Config struct {
	URL    string     `toml:"url"`     // the Mattermost server, https:// (http:// only if written so)
	CAFile string     `toml:"ca_file"` // extra trusted roots, PEM; optional
	Token  secret.Ref `toml:"token"`   // the bot token's secret ref, e.g. "credential:mattermost-token"

	// The paths are the layout table's in the state directory, filled
	// by the loader ([placed]); no key names them.
	StateDir   string `toml:"-"` // gateway/approvals.jsonl lives under it
	LoopSocket string `toml:"-"` // loopd's loop.sock
	// MemoryChatSocket is memoryd's memchat.sock, for the owner's !why and
	// !forget; "" (only a test's config) serves neither in the chat.
	MemoryChatSocket string `toml:"-"`

	SocketDir string   `toml:"-"` // holds gateway.sock (brokerd connects)
	AllowUIDs []uint32 `toml:"-"` // gateway.sock's peers: the layout table's, set by gatewayd (pkg/host/daemon); no key

	// MaxApprovalParts: an approval needing more posts than this is
	// posted as a pointer to bxctl approvals, not answerable in the chat.
	MaxApprovalParts int `toml:"max_approval_parts"`

	Allow     Allow     `toml:"allow"`
	Approvals Approvals `toml:"approvals"`
}

// Allow is who is heard.
type Allow struct {
	Users    []string `toml:"users"`    // Mattermost user ids; bots are heard only if listed
	Channels []string `toml:"channels"` // channel ids (open, private or group) where posts may be heard
}

// Approvals is who may answer approvals.
type Approvals struct {
	Users []string `toml:"users"` // empty: allow.users
}

// DefaultMaxApprovalParts is four parts (decision row of 2026-09-23).
const DefaultMaxApprovalParts = 4

// IDPattern is a Mattermost id: 26 characters of lower-case base32
// (model.NewId, mattermost/mattermost server/public/model/utils.go).
var IDPattern = regexp.MustCompile(`^[a-z0-9]{26}$`)

// ValidID reports whether s is a Mattermost id.
func ValidID(s string) bool { return IDPattern.MatchString(s) }

// retired are the keys this config no longer reads: the layout table
// decides them, and the daemon sets the fields from it (pkg/host/daemon).
var retired = map[string]string{
	"allow_uids": config.RetiredPeers(wire.Gateway.Name),
}

// placed are the paths the layout table gives gatewayd in its state
// directory, under the keys older configs named them by.
var placed = config.Placed[Config]{
	"state_dir":          {Field: func(c *Config) *string { return &c.StateDir }, In: func(s string) string { return s }},
	"loop_socket":        {Field: func(c *Config) *string { return &c.LoopSocket }, In: layout.LoopRun.SocketIn},
	"memory_chat_socket": {Field: func(c *Config) *string { return &c.MemoryChatSocket }, In: layout.MemchatRun.SocketIn},
	"socket_dir":         {Field: func(c *Config) *string { return &c.SocketDir }, In: layout.GatewayRun.In},
}

var loader = config.Checked[Config]{Check: Config.check, Retired: retired, Placed: placed}

// Load reads and checks gatewayd.toml, its paths those of state
// directory state; the lines returned are keys to delete
// ([config.Checked.Load]).
func Load(path, state string) (Config, []string, error) { return loader.Load(path, state) }

// Parse checks the config's text, named name in errors, as [Load] does
// once the file is read.
func Parse(data []byte, name, state string) (Config, []string, error) {
	return loader.Parse(data, name, state)
}

func (c Config) check(path string) (Config, error) {
	bad := func(format string, a ...any) (Config, error) {
		return Config{}, fmt.Errorf("config %s: "+format, append([]any{path}, a...)...)
	}
	if c.URL == "" {
		return bad("url is required")
	}
	if c.Token.Backend() == 0 {
		return bad("token is required: a secret ref such as \"credential:mattermost-token\", never the token itself")
	}
	if _, name, _ := strings.Cut(c.Token.String(), ":"); ValidID(name) {
		// A Mattermost token is 26 base32 characters: this is the token
		// pasted in, not a ref. Refused without echoing it.
		return bad("token looks like a Mattermost token itself; name where it is kept instead, e.g. \"credential:mattermost-token\"")
	}
	if len(c.Allow.Users) == 0 {
		return bad("allow.users is empty: nobody would be heard")
	}
	for _, list := range [][]string{c.Allow.Users, c.Allow.Channels, c.Approvals.Users} {
		for _, id := range list {
			if !ValidID(id) {
				return bad("%q is not a Mattermost id (26 lower-case letters and digits)", id)
			}
		}
	}
	allowed := map[string]bool{}
	for _, id := range c.Allow.Users {
		allowed[id] = true
	}
	for _, id := range c.Approvals.Users {
		if !allowed[id] {
			// An approver who is not heard could never answer: their
			// !approve would be ignored. Say so now, not in the chat.
			return bad("approvals.users lists %q, who is not in allow.users: gatewayd would never hear their answers; add them to allow.users or remove them; see docs/runbook.md#gateway-approver-not-allowed", id)
		}
	}
	if c.MaxApprovalParts < 0 || c.MaxApprovalParts > 50 {
		return bad("max_approval_parts must be between 0 (the default, %d) and 50", DefaultMaxApprovalParts)
	}
	if c.MaxApprovalParts == 0 {
		c.MaxApprovalParts = DefaultMaxApprovalParts
	}
	return c, nil
}

// Approvers are who may answer approvals: approvals.users, else
// allow.users.
func (c Config) Approvers() []string {
	if len(c.Approvals.Users) > 0 {
		return c.Approvals.Users
	}
	return c.Allow.Users
}
