// Package memoryd is memoryd.toml: its keys, defaults and checks (the
// [honcho] table's in package honchoconf), the one loader both memoryd
// and `bxctl doctor` run, so a config memoryd refuses is never "ok" to
// the doctor.
//
// Invariant: a Config that [Load] or [Parse] returns has every path
// the layout table's in its state directory, and its [honcho]
// table, if any, parsed ([Config.Fleet]).
package memoryd

import (
	"fmt"

	"wntrmute.dev/boxmaker/pkg/host/config"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd/honchoconf"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// Config is memoryd.toml; deploy/memoryd.toml is the documented example.
type Config struct {
	// The paths are the layout table's in the state directory, filled
	// by the loader ([placed]); no key names them. A test's config may
	// leave the optional ones empty: no memchat.sock, no gate.
	//
	// StateDir holds memory/ and index/ (memoryd's) and sessions/ (loopd's,
	// read-only here).
	StateDir string `toml:"-"`

	// The *AllowUIDs fields and GateListenerUIDs are each socket's peers:
	// the layout table's, set by memoryd (pkg/host/daemon), never read
	// from the file (retired).
	MemorySocketDir  string   `toml:"-"` // holds memory.sock (loopd connects)
	MemoryAllowUIDs  []uint32 `toml:"-"`
	MemtoolSocketDir string   `toml:"-"` // holds memtool.sock (brokerd connects)
	MemtoolAllowUIDs []uint32 `toml:"-"`
	AdminSocketDir   string   `toml:"-"` // holds memadmin.sock (bxctl connects)
	AdminAllowUIDs   []uint32 `toml:"-"`
	// ChatSocketDir holds memchat.sock (gatewayd connects: the owner's
	// !why and !forget).
	ChatSocketDir string   `toml:"-"`
	ChatAllowUIDs []uint32 `toml:"-"`
	// GateSocket is brokerd's gate.sock, asked each session's state when
	// a turn ends (the clean-turn gate); GateListenerUIDs are the users
	// its listener may run as (empty: memoryd's own). Without it no turn
	// is written to Honcho (none is filed by loopd's labels alone).
	GateSocket       string   `toml:"-"`
	GateListenerUIDs []uint32 `toml:"-"`
	// GateTimeoutMS bounds one gate query; default 2000, at most 10000.
	GateTimeoutMS int64 `toml:"gate_timeout_ms"`

	// IndexMaxClass: sessions (and notes) above this class are not
	// indexed. Default "private".
	IndexMaxClass string `toml:"index_max_class"`
	// StageIdentityWrites stages identity adds for the owner's review
	// (bxctl memory review) instead of applying them. Default off.
	StageIdentityWrites bool `toml:"stage_identity_writes"`

	// Honcho is the optional [honcho] table: fleet memory (package
	// fleet); absent, memoryd has no network.
	Honcho *honchoconf.Config `toml:"honcho"`

	// Projects are the owner's projects, [[project]] tables (project.go).
	Projects []Project `toml:"project"`

	maxClass dataclass.Class
	fleet    *honchoconf.Settings
}

// MaxClass is index_max_class, checked (default private).
func (c Config) MaxClass() dataclass.Class { return c.maxClass }

// Fleet is the checked [honcho] table, if the config has one.
func (c Config) Fleet() (honchoconf.Settings, bool) {
	if c.fleet == nil {
		return honchoconf.Settings{}, false
	}
	return *c.fleet, true
}

// retired are the keys this config no longer reads: the layout table
// decides them, and the daemon sets the fields from it (pkg/host/daemon).
var retired = map[string]string{
	"memory_allow_uids":  config.RetiredPeers(wire.Memory.Name),
	"memtool_allow_uids": config.RetiredPeers(wire.Memtool.Name),
	"admin_allow_uids":   config.RetiredPeers(wire.Memadmin.Name),
	"gate_listener_uids": "whose " + wire.Gate.Name + " memoryd reaches is the layout table's (its listener's uid in config/users.toml, else this daemon's own); see docs/runbook.md#layout-accept",
}

// placed are the paths the layout table gives memoryd in its state
// directory, under the keys older configs named them by.
var placed = config.Placed[Config]{
	"state_dir":          {Field: func(c *Config) *string { return &c.StateDir }, In: func(s string) string { return s }},
	"memory_socket_dir":  {Field: func(c *Config) *string { return &c.MemorySocketDir }, In: layout.MemoryRun.In},
	"memtool_socket_dir": {Field: func(c *Config) *string { return &c.MemtoolSocketDir }, In: layout.MemtoolRun.In},
	"admin_socket_dir":   {Field: func(c *Config) *string { return &c.AdminSocketDir }, In: layout.MemadminRun.In},
	"chat_socket_dir":    {Field: func(c *Config) *string { return &c.ChatSocketDir }, In: layout.MemchatRun.In},
	"gate_socket":        {Field: func(c *Config) *string { return &c.GateSocket }, In: layout.GateRun.SocketIn},
}

var loader = config.Checked[Config]{Check: Config.check, Retired: retired, Placed: placed}

// Load reads and checks memoryd.toml, its paths those of state
// directory state; the lines returned are keys to delete
// ([config.Checked.Load]).
func Load(path, state string) (Config, []string, error) { return loader.Load(path, state) }

// Parse checks the config's text, named name in errors, as [Load] does
// once the file is read.
func Parse(data []byte, name, state string) (Config, []string, error) {
	return loader.Parse(data, name, state)
}

func (c Config) check(path string) (Config, error) {
	if c.GateTimeoutMS < 0 || c.GateTimeoutMS > 10000 {
		return Config{}, fmt.Errorf("config %s: gate_timeout_ms must be 0 (the default, 2000) to 10000", path)
	}
	c.maxClass = dataclass.Private
	if c.IndexMaxClass != "" {
		mc, err := dataclass.Parse(c.IndexMaxClass)
		if err != nil {
			return Config{}, fmt.Errorf("config %s: index_max_class: %v", path, err)
		}
		c.maxClass = mc
	}
	if c.Honcho != nil {
		s, err := honchoconf.Parse(*c.Honcho)
		if err != nil {
			return Config{}, fmt.Errorf("config %s: %w", path, err)
		}
		c.fleet = &s
	}
	// The pairs are checked against the agent's workspaces: after [honcho].
	c.Projects = append([]Project(nil), c.Projects...)
	if err := checkProjects(c.Projects, c.fleet); err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}
