// Package brokerd is brokerd.toml: its keys, defaults and checks (the
// [runner] table's in runner.go, [consult]'s in consult.go), the one
// loader both brokerd and `bxctl doctor` run, so a config brokerd
// refuses is never "ok" to the doctor.
//
// Invariant: a Config that [Load] or [Parse] returns has every path
// the layout table's in its state directory, its [runner] and [consult]
// tables (if any) checked with their defaults filled, and every
// [secrets] name one a grant can spell.
package brokerd

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/config"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/ownership"
	"wntrmute.dev/boxmaker/pkg/host/secret"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/tool/grant"
	"wntrmute.dev/boxmaker/pkg/tool/mcpserver"
)

// Config is brokerd.toml; deploy/brokerd.toml is the documented example.
type Config struct {
	// The paths are the layout table's in the state directory, filled
	// by the loader ([placed]); no key names them. A test's config may
	// leave the optional ones empty: no gate.sock, no memory tools, no
	// courier.
	StateDir  string `toml:"-"` // audit/ and broker/sessions/ live here
	GrantsDir string `toml:"-"` // the owner's grants; read-only to brokerd
	// OwnerUID is the owner's uid: grant files, and every directory above
	// them, must be owned by root or this uid and writable by no one
	// else. Absent: brokerd's own uid (the owner runs brokerd, as under
	// bxctl up). Set it when brokerd has a uid of its own, so that a
	// grant brokerd's uid could have written is refused.
	OwnerUID *uint32 `toml:"owner_uid"`

	// The *AllowUIDs fields are each listener's peers (and the courier's
	// listener): the layout table's, set by brokerd (pkg/host/daemon),
	// never read from the file (retired).
	BrokerSocketDir string   `toml:"-"` // holds broker.sock (loopd connects)
	BrokerAllowUIDs []uint32 `toml:"-"`
	AdminSocketDir  string   `toml:"-"` // holds admin.sock (bxctl connects)
	AdminAllowUIDs  []uint32 `toml:"-"`

	// GateSocketDir holds gate.sock (memoryd connects): the read-only
	// session-state query of the clean-turn gate.
	GateSocketDir string   `toml:"-"`
	GateAllowUIDs []uint32 `toml:"-"`

	// MemtoolSocket is memoryd's memtool.sock, where decided memory tool
	// calls go.
	MemtoolSocket string `toml:"-"`

	// GatewaySocket is gatewayd's gateway.sock: the courier posts each
	// pending approval there for the owner to answer in the chat.
	GatewaySocket string `toml:"-"`
	// GatewayAllowUIDs are the users gateway.sock's listener may run as
	// (SO_PEERCRED of the dialled socket); empty: brokerd's own user.
	// The courier sends approvals, and takes answers, from no one else.
	GatewayAllowUIDs []uint32 `toml:"-"`

	// ApprovalTTLMS is how long a call waits for the owner; at most a day.
	ApprovalTTLMS int64 `toml:"approval_ttl_ms"`
	// ResultCap caps one tool result sent back to loopd, in bytes.
	ResultCap int `toml:"result_cap"`

	// Runner is where tool containers run. Absent: every allowed tool
	// call fails with a runbook pointer (runner-unavailable).
	Runner *Runner `toml:"runner"`
	// Secrets maps the secret names grants use to where each value
	// lives ("credential:NAME", "env:NAME", "file:/path").
	Secrets map[string]secret.Ref `toml:"secrets"`
	// Consult is where the consult tool goes (consult.go).
	// Absent: every consult is refused (consult-unconfigured).
	Consult *Consult `toml:"consult"`

	// path is the file Load read, which no tool call may mount.
	path string
}

// Protected lists brokerd's own files and directories and every entry
// of the state directory's layout table, which no tool
// call may mount or reach through a mount: a Unix socket can be
// connected through a read-only mount, and admin.sock would let a tool
// approve its own calls.
func (c Config) Protected() []string {
	list := []string{c.StateDir, c.GrantsDir, c.MCPDir(), c.BrokerSocketDir, c.AdminSocketDir}
	if c.GateSocketDir != "" {
		list = append(list, c.GateSocketDir)
	}
	// Every role's state and config, and the owner's jobs, by the layout
	// table's own paths: the state directory already covers them, but a
	// path named here stays protected even if state_dir's own entry is
	// ever narrowed.
	list = append(list, layout.In(c.StateDir)...)
	if c.path != "" {
		if abs, err := filepath.Abs(c.path); err == nil {
			list = append(list, abs)
		}
	}
	for _, s := range []string{c.MemtoolSocket, c.GatewaySocket} {
		if s != "" {
			list = append(list, filepath.Dir(s))
		}
	}
	for _, r := range c.Secrets {
		if name, ok := strings.CutPrefix(r.String(), "file:"); ok && r.Backend() == secret.File {
			list = append(list, name)
		}
	}
	return list
}

// Defaults.
const (
	DefaultApprovalTTL = 15 * time.Minute
	DefaultResultCap   = 64 << 10
)

// retired are the keys this config no longer reads: the layout table
// decides them, and the daemon sets the fields from it (pkg/host/daemon).
var retired = map[string]string{
	"broker_allow_uids":  config.RetiredPeers(wire.Broker.Name),
	"admin_allow_uids":   config.RetiredPeers(wire.Admin.Name),
	"gate_allow_uids":    config.RetiredPeers(wire.Gate.Name),
	"gateway_allow_uids": "whose " + wire.Gateway.Name + " brokerd reaches is the layout table's (its listener's uid in config/users.toml, else this daemon's own); see docs/runbook.md#layout-accept",
}

// placed are the paths the layout table gives brokerd in its state
// directory, under the keys older configs named them by.
var placed = config.Placed[Config]{
	"state_dir":         {Field: func(c *Config) *string { return &c.StateDir }, In: func(s string) string { return s }},
	"grants_dir":        {Field: func(c *Config) *string { return &c.GrantsDir }, In: layout.Grants.In},
	"broker_socket_dir": {Field: func(c *Config) *string { return &c.BrokerSocketDir }, In: layout.BrokerRun.In},
	"admin_socket_dir":  {Field: func(c *Config) *string { return &c.AdminSocketDir }, In: layout.AdminRun.In},
	"gate_socket_dir":   {Field: func(c *Config) *string { return &c.GateSocketDir }, In: layout.GateRun.In},
	"memtool_socket":    {Field: func(c *Config) *string { return &c.MemtoolSocket }, In: layout.MemtoolRun.SocketIn},
	"gateway_socket":    {Field: func(c *Config) *string { return &c.GatewaySocket }, In: layout.GatewayRun.SocketIn},
}

var loader = config.Checked[Config]{Check: Config.check, Retired: retired, Placed: placed}

// Load reads and checks brokerd.toml, its paths those of state
// directory state; the lines returned are keys to delete
// ([config.Checked.Load]).
func Load(path, state string) (Config, []string, error) { return loader.Load(path, state) }

// Parse checks the config's text, named name in errors, as [Load] does
// once the file is read.
func Parse(data []byte, name, state string) (Config, []string, error) {
	return loader.Parse(data, name, state)
}

func (c Config) check(path string) (Config, error) {
	c.path = path
	if c.ApprovalTTLMS < 0 || c.ApprovalTTLMS > int64(24*time.Hour/time.Millisecond) {
		return Config{}, fmt.Errorf("config %s: approval_ttl_ms must be between 0 (the default, 15 minutes) and one day", path)
	}
	if c.ResultCap < 0 {
		return Config{}, fmt.Errorf("config %s: result_cap must not be negative", path)
	}
	if c.Runner != nil {
		r, err := c.Runner.Check()
		if err != nil {
			return Config{}, fmt.Errorf("config %s: [runner]: %v", path, err)
		}
		c.Runner = &r
	}
	if err := c.Consult.check(); err != nil {
		return Config{}, fmt.Errorf("config %s: [consult]: %v", path, err)
	}
	names := make([]string, 0, len(c.Secrets))
	for name := range c.Secrets {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if !grant.SecretPattern.MatchString(name) {
			return Config{}, fmt.Errorf("config %s: [secrets]: name %q must be 1 to 64 uppercase letters, digits or '_', starting with a letter (as grants write it)", path, name)
		}
	}
	return c, nil
}

// Owners are whose grant files brokerd believes: root and the owner.
func (c Config) Owners() ownership.Owners {
	if c.OwnerUID != nil {
		return ownership.Trust(*c.OwnerUID)
	}
	return ownership.Self()
}

// GatewayUIDs is GatewayAllowUIDs, or brokerd's own uid when empty.
func (c Config) GatewayUIDs() []uint32 {
	if len(c.GatewayAllowUIDs) > 0 {
		return c.GatewayAllowUIDs
	}
	return []uint32{uint32(os.Getuid())}
}

// ApprovalTTL is how long a call waits for the owner.
func (c Config) ApprovalTTL() time.Duration {
	if c.ApprovalTTLMS == 0 {
		return DefaultApprovalTTL
	}
	return time.Duration(c.ApprovalTTLMS) * time.Millisecond
}

// ResultCapBytes caps one tool result sent back to loopd.
func (c Config) ResultCapBytes() int {
	if c.ResultCap == 0 {
		return DefaultResultCap
	}
	return c.ResultCap
}

// MCPDir is the owner's mcp directory: beside the grant directory, under
// the same ownership rule (package layout's MCP entry in a state
// directory).
func (c Config) MCPDir() string { return mcpserver.DirBeside(c.GrantsDir) }
