package honcho

import "wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd/honchoconf"

// The [honcho] table and Honcho's ids are package honchoconf's, which
// `bxctl doctor` runs too; these names keep this package's callers as
// they were.
type (
	Config   = honchoconf.Config
	Other    = honchoconf.Other
	Settings = honchoconf.Settings
	Source   = honchoconf.Source
	ID       = honchoconf.ID
)

// Request timeouts and limits: honchoconf's.
const (
	DefaultTimeout   = honchoconf.DefaultTimeout
	MinTimeout       = honchoconf.MinTimeout
	MaxTimeout       = honchoconf.MaxTimeout
	DefaultReadBound = honchoconf.DefaultReadBound
	MaxReadBound     = honchoconf.MaxReadBound
	DefaultSpeaker   = honchoconf.DefaultSpeaker
	MaxIDLen         = honchoconf.MaxIDLen
)

// ErrID is wrapped by every refusal of [ParseID].
var ErrID = honchoconf.ErrID

// Parse checks a [honcho] table (honchoconf.Parse).
func Parse(c Config) (Settings, error) { return honchoconf.Parse(c) }

// ParseID checks s against Honcho's id rule.
func ParseID(s string) (ID, error) { return honchoconf.ParseID(s) }

// MustID is ParseID for constants; it panics on a bad id.
func MustID(s string) ID { return honchoconf.MustID(s) }
