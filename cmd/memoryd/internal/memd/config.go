package memd

import (
	"time"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd/honchoconf"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// Config is memoryd.toml as package roleconf/memoryd loads and checks
// it (the loader `bxctl doctor` runs too), with what memoryd derives.
type Config struct {
	memoryd.Config

	maxClass dataclass.Class
	fleet    *honchoconf.Settings
	// backoffMin is the outbox's first retry wait (tests shorten it).
	backoffMin time.Duration
}

// Fleet is the checked [honcho] table, if the config has one.
func (c Config) Fleet() (honchoconf.Settings, bool) {
	if c.fleet == nil {
		return honchoconf.Settings{}, false
	}
	return *c.fleet, true
}

// Load reads and checks memoryd.toml.
func Load(path, state string) (Config, []string, error) {
	c, leftover, err := memoryd.Load(path, state)
	if err != nil {
		return Config{}, nil, err
	}
	out := Config{Config: c, maxClass: c.MaxClass()}
	if s, ok := c.Fleet(); ok {
		out.fleet = &s
	}
	return out, leftover, nil
}
