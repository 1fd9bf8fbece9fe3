// Package loopd is loopd.toml: its keys, defaults and checks (a job
// schedule's in package schedule), the one loader both loopd and `bxctl
// doctor` run, so a config loopd refuses is never "ok" to the doctor.
//
// Invariant: a Config that [Load] or [Parse] returns has every path
// the layout table's in its state directory, a model name, slots that are not negative, every [epoch]
// and [jobs] value in range, the tiering schedule parsed and only
// skippable self-test checks in selftest.skip; background_slot is
// filled (default 1).
package loopd

import (
	"fmt"
	"path/filepath"
	"slices"

	"wntrmute.dev/boxmaker/pkg/host/config"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/ownership"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/loopd/schedule"
	"wntrmute.dev/boxmaker/pkg/model/selftest"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// Config is loopd.toml; deploy/loopd.toml is the documented example.
type Config struct {
	// The paths are the layout table's in the state directory, filled
	// by the loader ([placed]); no key names them.
	StateDir    string   `toml:"-"`          // sessions/ lives here
	SocketDir   string   `toml:"-"`          // holds loop.sock
	AllowUIDs   []uint32 `toml:"-"`          // loop.sock's peers: the layout table's, set by loopd (pkg/host/daemon); no key
	AllowGIDs   []uint32 `toml:"allow_gids"` // if set, the peer's gid must be in it too
	InferSocket string   `toml:"-"`          // inferproxy's infer.sock
	// BrokerSocket is brokerd's broker.sock. Empty (only a test's
	// config, never the loader's) means no brokerd: every tool call but
	// clock and find_tool is refused.
	BrokerSocket string `toml:"-"`
	// MemorySocket is memoryd's memory.sock: a new session does not
	// start unless memoryd hands over the identity block. Empty (only a
	// test's config) means no memoryd: no identity block, and turns are
	// not indexed.
	MemorySocket string `toml:"-"`
	// AskMemory offers the model ask_memory (the fleet memory's
	// dialectic, answered by memoryd through Honcho) in every new epoch's
	// tools array. Off by default: without fleet memory (memoryd.toml's
	// [honcho]) the tool can only answer that it is unavailable.
	AskMemory  bool   `toml:"ask_memory"`
	SystemFile string `toml:"system_prompt_file"`

	Model    Model    `toml:"model"`
	Serving  Serving  `toml:"serving"`
	Turn     Turn     `toml:"turn"`
	SelfTest SelfTest `toml:"selftest"`
	Epoch    Epoch    `toml:"epoch"`
	Jobs     Jobs     `toml:"jobs"`
}

// Model is how loopd calls the model. Sampling values are in
// thousandths (temperature_milli = 600 is 0.6): configs hold no floats.
type Model struct {
	Name               string `toml:"name"`
	MainSlot           int    `toml:"main_slot"`
	BackgroundSlot     *int   `toml:"background_slot"` // default 1
	TemperatureMilli   *int   `toml:"temperature_milli"`
	TopPMilli          *int   `toml:"top_p_milli"`
	TopK               *int   `toml:"top_k"`
	ThinkingCap        int    `toml:"thinking_cap"`
	MaxTokens          int    `toml:"max_tokens"`
	FirstByteTimeoutMS int64  `toml:"first_byte_timeout_ms"`
	ModelLoadTimeoutMS int64  `toml:"model_load_timeout_ms"`
	IdleTimeoutMS      int64  `toml:"idle_timeout_ms"`
}

// Serving records the server's settings (owned by the owner's NixOS
// configuration); the startup self-test compares them with the server.
type Serving struct {
	NCtx           int    `toml:"n_ctx"`
	Slots          int    `toml:"slots"`
	TemplateSHA256 string `toml:"template_sha256"`
}

// Turn holds the per-turn runaway limits.
type Turn struct {
	MaxCalls      int `toml:"max_calls"`
	RepeatLimit   int `toml:"repeat_limit"`
	ToolResultCap int `toml:"tool_result_cap"`
}

// SelfTest lets the owner accept named self-test failures (logged as
// warnings), for example "tool-call" against a model too small to call
// tools. Every other failed check stops loopd from starting.
type SelfTest struct {
	Skip []string `toml:"skip"`
}

// Epoch is [epoch]: when a session's epoch changes (loopd's package
// server) and how (package epoch, whose defaults fill the zero values).
type Epoch struct {
	// IdleAfterMS: a session idle this long whose context is over
	// CompactAtPercent of the slot changes epoch. Default 10 minutes; 0
	// is the default, and a negative value turns the idle trigger off
	// (bxctl compact and a full context still change epochs).
	IdleAfterMS      int64 `toml:"idle_after_ms"`
	CompactAtPercent int   `toml:"compact_at_percent"` // default 60
	// SummaryMaxTokens caps the summary request; default 1024.
	SummaryMaxTokens int `toml:"summary_max_tokens"`
	// Prewarm sends the new prefix to the session's slot after a change,
	// so its first turn finds it cached. Default on.
	Prewarm *bool `toml:"prewarm"`
}

// Jobs is [jobs]: whose job files loopd believes and how often it reads
// the directory again.
type Jobs struct {
	// OwnerUID is the owner's uid: job files, and every directory above
	// them, must be owned by root or this uid and writable by no one
	// else. Absent: loopd's own uid (the owner runs loopd, as under
	// bxctl up without root). Set it when loopd has a uid of its own, so
	// that a job file loopd's uid could have written is refused.
	OwnerUID *uint32 `toml:"owner_uid"`
	// PollMS is how often the jobs directory is read again (default
	// 15000): an edit or a new file is seen within it.
	PollMS int64 `toml:"poll_ms"`
	// ClockFile is unstable and for tests only: when set, the scheduler
	// reads the current time (RFC 3339) from this file instead of the
	// system clock, so a test moves time without waiting for it.
	ClockFile string `toml:"clock_file"`
	// Tiering is when the built-in memory tiering job runs, a cron line
	// (default [DefaultTiering]), or "off". It asks memoryd.
	Tiering string `toml:"tiering"`
}

// DefaultTiering is when the tiering job runs unless [jobs] tiering says
// otherwise: Sundays at 04:00 UTC.
const DefaultTiering = "0 4 * * 0"

// Skippable are the self-test checks selftest.skip may name.
var Skippable = []string{selftest.CheckContext, selftest.CheckFit, selftest.CheckSettings, selftest.CheckToolCall, selftest.CheckCache}

// retired are the keys this config no longer reads: the layout table
// decides them, and the daemon sets the fields from it (pkg/host/daemon).
var retired = map[string]string{
	"allow_uids": config.RetiredPeers(wire.Loop.Name),
}

// placed are the paths the layout table gives loopd in its state
// directory, under the keys older configs named them by.
var placed = config.Placed[Config]{
	"state_dir":     {Field: func(c *Config) *string { return &c.StateDir }, In: func(s string) string { return s }},
	"socket_dir":    {Field: func(c *Config) *string { return &c.SocketDir }, In: layout.LoopRun.In},
	"infer_socket":  {Field: func(c *Config) *string { return &c.InferSocket }, In: layout.InferRun.SocketIn},
	"broker_socket": {Field: func(c *Config) *string { return &c.BrokerSocket }, In: layout.BrokerRun.SocketIn},
	"memory_socket": {Field: func(c *Config) *string { return &c.MemorySocket }, In: layout.MemoryRun.SocketIn},
}

var loader = config.Checked[Config]{Check: Config.check, Retired: retired, Placed: placed}

// Load reads and checks loopd.toml, its paths those of state directory
// state; the lines returned are keys to delete ([config.Checked.Load]).
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
	if c.Model.Name == "" {
		return bad("model.name is required (the router routes on it)")
	}
	if c.Model.BackgroundSlot == nil {
		one := 1
		c.Model.BackgroundSlot = &one
	}
	if err := c.Epoch.check(); err != nil {
		return bad("%v", err)
	}
	if c.Model.MainSlot < 0 || *c.Model.BackgroundSlot < 0 {
		return bad("slots must not be negative")
	}
	if err := c.Jobs.check(); err != nil {
		return bad("%v", err)
	}
	for _, s := range c.SelfTest.Skip {
		if !slices.Contains(Skippable, s) {
			return bad("selftest.skip: %q is not a check that may be skipped (context, fit, settings, tool-call, cache)", s)
		}
	}
	return c, nil
}

func (e Epoch) check() error {
	if e.CompactAtPercent < 0 || e.CompactAtPercent > 100 {
		return fmt.Errorf("epoch.compact_at_percent is %d, want 1 to 100 (0 for the default)", e.CompactAtPercent)
	}
	if e.SummaryMaxTokens < 0 {
		return fmt.Errorf("epoch.summary_max_tokens is %d, want a positive number (0 for the default)", e.SummaryMaxTokens)
	}
	return nil
}

func (j Jobs) check() error {
	switch {
	case j.PollMS < 0 || j.PollMS > 3600_000:
		return fmt.Errorf("jobs.poll_ms must be 0 (the default) to 3600000")
	case j.PollMS > 0 && j.PollMS < 10:
		return fmt.Errorf("jobs.poll_ms must be at least 10")
	case j.ClockFile != "" && !filepath.IsAbs(j.ClockFile):
		return fmt.Errorf("jobs.clock_file must be an absolute path, got %q", j.ClockFile)
	}
	if _, _, err := j.TieringSchedule(); err != nil {
		return fmt.Errorf("jobs.tiering: %v", err)
	}
	return nil
}

// Owners are whose job files loopd believes: root and owner_uid, or
// loopd's own uid without one.
func (j Jobs) Owners() ownership.Owners {
	if j.OwnerUID != nil {
		return ownership.Trust(*j.OwnerUID)
	}
	return ownership.Self()
}

// TieringSchedule is the tiering job's schedule; on is false when
// tiering is "off".
func (j Jobs) TieringSchedule() (s schedule.Schedule, on bool, err error) {
	switch j.Tiering {
	case "off":
		return schedule.Schedule{}, false, nil
	case "":
		s, err = schedule.ParseCron(DefaultTiering)
	default:
		s, err = schedule.ParseCron(j.Tiering)
	}
	return s, err == nil, err
}
