package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/runner"
	"wntrmute.dev/boxmaker/pkg/host/config"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/ownership"
	"wntrmute.dev/boxmaker/pkg/host/secret"
	"wntrmute.dev/boxmaker/pkg/tool/grant"
)

// Config is brokerd.toml; deploy/brokerd.toml is the documented example.
type Config struct {
	StateDir  string `toml:"state_dir"`  // audit/ and broker/sessions/ live here
	GrantsDir string `toml:"grants_dir"` // the owner's grants; read-only to brokerd
	// OwnerUID is the owner's uid: grant files, and every directory above
	// them, must be owned by root or this uid and writable by no one
	// else. Absent: brokerd's own uid (the owner runs brokerd, as under
	// bxctl up). Set it when brokerd has a uid of its own, so that a
	// grant brokerd's uid could have written is refused.
	OwnerUID *uint32 `toml:"owner_uid"`

	BrokerSocketDir string   `toml:"broker_socket_dir"` // holds broker.sock (loopd connects)
	BrokerAllowUIDs []uint32 `toml:"broker_allow_uids"`
	AdminSocketDir  string   `toml:"admin_socket_dir"` // holds admin.sock (bxctl connects)
	AdminAllowUIDs  []uint32 `toml:"admin_allow_uids"`

	// GateSocketDir holds gate.sock (memoryd connects): the read-only
	// session-state query of the clean-turn gate. Empty: no gate.sock,
	// and memoryd writes no turn to Honcho (it files none without an answer).
	GateSocketDir string   `toml:"gate_socket_dir"`
	GateAllowUIDs []uint32 `toml:"gate_allow_uids"`

	// MemtoolSocket is memoryd's memtool.sock, where decided memory tool
	// calls go. Empty: memory tools fail with a runbook pointer.
	MemtoolSocket string `toml:"memtool_socket"`

	// GatewaySocket is gatewayd's gateway.sock: the courier posts each
	// pending approval there for the owner to answer in the chat.
	// Empty: approvals are answered with bxctl only.
	GatewaySocket string `toml:"gateway_socket"`
	// GatewayAllowUIDs are the users gateway.sock's listener may run as
	// (SO_PEERCRED of the dialled socket); empty: brokerd's own user.
	// The courier sends approvals, and takes answers, from no one else.
	GatewayAllowUIDs []uint32 `toml:"gateway_allow_uids"`

	// ApprovalTTLMS is how long a call waits for the owner; at most a day.
	ApprovalTTLMS int64 `toml:"approval_ttl_ms"`
	// ResultCap caps one tool result sent back to loopd, in bytes.
	ResultCap int `toml:"result_cap"`

	// Runner is where tool containers run. Absent: every allowed tool
	// call fails with a runbook pointer (runner-unavailable).
	Runner *runner.Config `toml:"runner"`
	// Secrets maps the secret names grants use to where each value
	// lives ("credential:NAME", "env:NAME", "file:/path").
	Secrets map[string]secret.Ref `toml:"secrets"`
	// Consult is where the consult tool goes (consult_config.go).
	// Absent: every consult is refused (consult-unconfigured).
	Consult *ConsultConfig `toml:"consult"`

	// path is the file Load read, which no tool call may mount.
	path string
}

// protected lists brokerd's own files and directories and every entry
// of the state directory's layout table, which no tool
// call may mount or reach through a mount: a Unix socket can be
// connected through a read-only mount, and admin.sock would let a tool
// approve its own calls.
func (c Config) protected() []string {
	list := []string{c.StateDir, c.GrantsDir, c.mcpDir(), c.BrokerSocketDir, c.AdminSocketDir}
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

// Load reads and checks brokerd.toml.
func Load(path string) (Config, error) {
	var c Config
	if err := config.Load(path, &c); err != nil {
		return Config{}, err
	}
	c.path = path
	for name, p := range map[string]string{"state_dir": c.StateDir, "grants_dir": c.GrantsDir,
		"broker_socket_dir": c.BrokerSocketDir, "admin_socket_dir": c.AdminSocketDir} {
		if !filepath.IsAbs(p) {
			return Config{}, fmt.Errorf("config %s: %s must be an absolute path, got %q", path, name, p)
		}
	}
	if c.MemtoolSocket != "" && !filepath.IsAbs(c.MemtoolSocket) {
		return Config{}, fmt.Errorf("config %s: memtool_socket must be an absolute path, got %q", path, c.MemtoolSocket)
	}
	if c.GateSocketDir != "" {
		if !filepath.IsAbs(c.GateSocketDir) {
			return Config{}, fmt.Errorf("config %s: gate_socket_dir must be an absolute path, got %q", path, c.GateSocketDir)
		}
		for _, other := range []string{c.BrokerSocketDir, c.AdminSocketDir} {
			if filepath.Clean(c.GateSocketDir) == filepath.Clean(other) {
				// memoryd reaching broker.sock could run tools; admin.sock
				// could answer approvals.
				return Config{}, fmt.Errorf("config %s: gate_socket_dir must differ from broker_socket_dir and admin_socket_dir", path)
			}
		}
	}
	if c.GatewaySocket != "" && !filepath.IsAbs(c.GatewaySocket) {
		return Config{}, fmt.Errorf("config %s: gateway_socket must be an absolute path, got %q", path, c.GatewaySocket)
	}
	if filepath.Clean(c.BrokerSocketDir) == filepath.Clean(c.AdminSocketDir) {
		// One directory would give whoever may reach broker.sock the
		// approving socket too.
		return Config{}, fmt.Errorf("config %s: broker_socket_dir and admin_socket_dir must differ", path)
	}
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

// owners are whose grant files brokerd believes: root and the owner.
func (c Config) owners() ownership.Owners {
	if c.OwnerUID != nil {
		return ownership.Trust(*c.OwnerUID)
	}
	return ownership.Self()
}

// gatewayUIDs is GatewayAllowUIDs, or brokerd's own uid when empty.
func (c Config) gatewayUIDs() []uint32 {
	if len(c.GatewayAllowUIDs) > 0 {
		return c.GatewayAllowUIDs
	}
	return []uint32{uint32(os.Getuid())}
}

func (c Config) ttl() time.Duration {
	if c.ApprovalTTLMS == 0 {
		return DefaultApprovalTTL
	}
	return time.Duration(c.ApprovalTTLMS) * time.Millisecond
}

func (c Config) resultCap() int {
	if c.ResultCap == 0 {
		return DefaultResultCap
	}
	return c.ResultCap
}
