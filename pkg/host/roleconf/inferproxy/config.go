// Package inferproxy is inferproxy.toml: its keys, defaults and checks,
// the one loader both inferproxy and `bxctl doctor` run, so a config
// inferproxy refuses is never "ok" to the doctor.
//
// Invariant: a Config that [Load] or [Parse] returns has every key
// checked and every default filled; inferproxy starts on nothing else.
package inferproxy

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/config"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// Config is inferproxy.toml. deploy/inferproxy.toml is the documented
// example.
type Config struct {
	SocketDir string   `toml:"-"`          // holds infer.sock: the layout table's run/infer in the state directory; no key
	AllowUIDs []uint32 `toml:"-"`          // infer.sock's peers: the layout table's, set by inferproxy (pkg/host/daemon); no key
	AllowGIDs []uint32 `toml:"allow_gids"` // if set, the peer's gid must be in it too
	Upstream  string   `toml:"upstream"`   // llama-server's host:port; the only address this role dials

	MaxConns      int   `toml:"max_conns"`       // concurrent proxied connections
	AcceptsPerSec int   `toml:"accepts_per_sec"` // sustained new connections per second
	AcceptBurst   int   `toml:"accept_burst"`    // new connections allowed at once
	IdleTimeoutMS int64 `toml:"idle_timeout_ms"` // close when neither direction moved a byte for this long
	DialTimeoutMS int64 `toml:"dial_timeout_ms"` // connecting to the upstream
}

// Defaults. The idle timeout must outlast loopd's wait for a first byte
// (10 min for a busy slot) plus a model load, because llama-server sends
// nothing at all while a request is queued.
const (
	DefaultMaxConns      = 8
	DefaultAcceptsPerSec = 10
	DefaultAcceptBurst   = 20
	DefaultIdleTimeout   = 15 * time.Minute
	DefaultDialTimeout   = 10 * time.Second
)

// retired are the keys this config no longer reads: the layout table
// decides them, and the daemon sets the fields from it (pkg/host/daemon).
var retired = map[string]string{
	"allow_uids": config.RetiredPeers(wire.Infer.Name),
}

// placed are the paths the layout table gives inferproxy in its state
// directory, under the keys older configs named them by.
var placed = config.Placed[Config]{
	"socket_dir": {Field: func(c *Config) *string { return &c.SocketDir }, In: layout.InferRun.In},
}

var loader = config.Checked[Config]{Check: func(c Config, _ string) (Config, error) { return c.WithDefaults() }, Retired: retired, Placed: placed}

// Load reads and checks the config file, its paths those of state
// directory state; the lines returned are keys to delete
// ([config.Checked.Load]).
func Load(path, state string) (Config, []string, error) { return loader.Load(path, state) }

// Parse checks the config's text, named name in errors, as [Load] does
// once the file is read.
func Parse(data []byte, name, state string) (Config, []string, error) {
	return loader.Parse(data, name, state)
}

// WithDefaults checks c and fills its defaults.
func (c Config) WithDefaults() (Config, error) {
	host, port, err := net.SplitHostPort(c.Upstream)
	if err != nil || host == "" {
		return Config{}, fmt.Errorf("config: upstream must be host:port, got %q", c.Upstream)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return Config{}, fmt.Errorf("config: upstream port %q is not 1..65535", port)
	}
	for _, f := range []struct {
		v    *int
		def  int
		name string
	}{{&c.MaxConns, DefaultMaxConns, "max_conns"}, {&c.AcceptsPerSec, DefaultAcceptsPerSec, "accepts_per_sec"}, {&c.AcceptBurst, DefaultAcceptBurst, "accept_burst"}} {
		if *f.v < 0 {
			return Config{}, fmt.Errorf("config: %s must not be negative", f.name)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if c.IdleTimeoutMS < 0 || c.DialTimeoutMS < 0 {
		return Config{}, fmt.Errorf("config: timeouts must not be negative")
	}
	return c, nil
}

// Idle is the idle timeout.
func (c Config) Idle() time.Duration {
	if c.IdleTimeoutMS == 0 {
		return DefaultIdleTimeout
	}
	return time.Duration(c.IdleTimeoutMS) * time.Millisecond
}

// DialTimeout bounds connecting to the upstream.
func (c Config) DialTimeout() time.Duration {
	if c.DialTimeoutMS == 0 {
		return DefaultDialTimeout
	}
	return time.Duration(c.DialTimeoutMS) * time.Millisecond
}
