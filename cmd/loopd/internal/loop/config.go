package loop

import (
	"fmt"
	"path/filepath"
	"time"

	"wntrmute.dev/boxmaker/cmd/loopd/internal/turn"
	"wntrmute.dev/boxmaker/pkg/host/config"
	"wntrmute.dev/boxmaker/pkg/model/llama"
	"wntrmute.dev/boxmaker/pkg/model/selftest"
)

// Config is loopd.toml; deploy/loopd.toml is the documented example.
type Config struct {
	StateDir    string   `toml:"state_dir"`    // sessions/ lives here
	SocketDir   string   `toml:"socket_dir"`   // holds loop.sock
	AllowUIDs   []uint32 `toml:"allow_uids"`   // peers on loop.sock; empty = this user
	AllowGIDs   []uint32 `toml:"allow_gids"`   // if set, the peer's gid must be in it too
	InferSocket string   `toml:"infer_socket"` // inferproxy's infer.sock
	// BrokerSocket is brokerd's broker.sock. Empty means no brokerd: every
	// tool call but clock and find_tool is refused.
	BrokerSocket string `toml:"broker_socket"`
	// MemorySocket is memoryd's memory.sock. Empty means no memoryd: the
	// baseline has no identity block and turns are not indexed. Set, a
	// new session does not start unless memoryd hands over the block.
	MemorySocket string `toml:"memory_socket"`
	// AskMemory offers the model ask_memory (the fleet memory's
	// dialectic, answered by memoryd through Honcho) in every new epoch's
	// tools array. Off by default: without fleet memory (memoryd.toml's
	// [honcho]) the tool can only answer that it is unavailable, and it
	// needs memory_socket.
	AskMemory  bool   `toml:"ask_memory"`
	SystemFile string `toml:"system_prompt_file"`

	Model    ModelConfig    `toml:"model"`
	Serving  ServingConfig  `toml:"serving"`
	Turn     TurnConfig     `toml:"turn"`
	SelfTest SelfTestConfig `toml:"selftest"`
	Epoch    EpochConfig    `toml:"epoch"`
	Jobs     JobsConfig     `toml:"jobs"` // jobs.go
}

// ModelConfig is how loopd calls the model. Sampling values are in
// thousandths (temperature_milli = 600 is 0.6): configs hold no floats.
type ModelConfig struct {
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

// ServingConfig records the server's settings (owned by the owner's NixOS
// configuration); the startup self-test compares them with the server.
type ServingConfig struct {
	NCtx           int    `toml:"n_ctx"`
	Slots          int    `toml:"slots"`
	TemplateSHA256 string `toml:"template_sha256"`
}

// TurnConfig holds the per-turn runaway limits.
type TurnConfig struct {
	MaxCalls      int `toml:"max_calls"`
	RepeatLimit   int `toml:"repeat_limit"`
	ToolResultCap int `toml:"tool_result_cap"`
}

// SelfTestConfig lets the owner accept named self-test failures (logged as
// warnings), for example "tool-call" against a model too small to call
// tools. Every other failed check stops loopd from starting.
type SelfTestConfig struct {
	Skip []string `toml:"skip"`
}

// Load reads and checks loopd.toml.
func Load(path string) (Config, error) {
	var c Config
	if err := config.Load(path, &c); err != nil {
		return Config{}, err
	}
	for name, p := range map[string]string{"state_dir": c.StateDir, "socket_dir": c.SocketDir, "infer_socket": c.InferSocket} {
		if !filepath.IsAbs(p) {
			return Config{}, fmt.Errorf("config %s: %s must be an absolute path, got %q", path, name, p)
		}
	}
	if c.BrokerSocket != "" && !filepath.IsAbs(c.BrokerSocket) {
		return Config{}, fmt.Errorf("config %s: broker_socket must be an absolute path, got %q", path, c.BrokerSocket)
	}
	if c.AskMemory && c.MemorySocket == "" {
		return Config{}, fmt.Errorf("config %s: ask_memory needs memory_socket (memoryd answers it); see docs/runbook.md#fleet-not-configured", path)
	}
	if c.MemorySocket != "" && !filepath.IsAbs(c.MemorySocket) {
		return Config{}, fmt.Errorf("config %s: memory_socket must be an absolute path, got %q", path, c.MemorySocket)
	}
	if c.Model.Name == "" {
		return Config{}, fmt.Errorf("config %s: model.name is required (the router routes on it)", path)
	}
	if c.Model.BackgroundSlot == nil {
		one := 1
		c.Model.BackgroundSlot = &one
	}
	if err := c.Epoch.check(); err != nil {
		return Config{}, fmt.Errorf("config %s: %v", path, err)
	}
	if c.Model.MainSlot < 0 || *c.Model.BackgroundSlot < 0 {
		return Config{}, fmt.Errorf("config %s: slots must not be negative", path)
	}
	if err := c.Jobs.check(path); err != nil {
		return Config{}, err
	}
	for _, s := range c.SelfTest.Skip {
		switch s {
		case selftest.CheckContext, selftest.CheckFit, selftest.CheckSettings, selftest.CheckToolCall, selftest.CheckCache:
		default:
			return Config{}, fmt.Errorf("config %s: selftest.skip: %q is not a check that may be skipped (context, fit, settings, tool-call, cache)", path, s)
		}
	}
	return c, nil
}

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

func milli(p *int, def float64) float64 {
	if p == nil {
		return def
	}
	return float64(*p) / 1000
}

// client builds the llama client for one slot.
func (c Config) client(slot int) (*llama.Client, error) {
	topK := llama.DefaultTopK
	if c.Model.TopK != nil {
		topK = *c.Model.TopK
	}
	return llama.New(llama.Config{
		SocketPath: c.InferSocket,
		Model:      c.Model.Name,
		IDSlot:     slot,
		Sampling: &llama.Sampling{
			Temperature: milli(c.Model.TemperatureMilli, llama.DefaultTemperature),
			TopP:        milli(c.Model.TopPMilli, llama.DefaultTopP),
			TopK:        topK,
		},
		ThinkingCap:      c.Model.ThinkingCap,
		MaxTokens:        c.Model.MaxTokens,
		FirstByteTimeout: ms(c.Model.FirstByteTimeoutMS),
		ModelLoadTimeout: ms(c.Model.ModelLoadTimeoutMS),
		IdleTimeout:      ms(c.Model.IdleTimeoutMS),
	})
}

func (c Config) limits() turn.Limits {
	return turn.Limits{MaxCalls: c.Turn.MaxCalls, RepeatLimit: c.Turn.RepeatLimit, ResultCap: c.Turn.ToolResultCap}
}
