package llama

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Options configures a fake server. The zero value gives the defaults
// noted on each field.
type Options struct {
	// Slots is the number of slots (-np). Default 2, the deployment's
	// count; llama-server itself defaults to 4 (server.cpp:152-156).
	Slots int
	// NCtx is each slot's context in tokens, as /props reports it under
	// default_generation_settings (server-context.cpp:4460-4505). Default 8192.
	NCtx int
	// NBatch is the prompt batch size: one progress event follows each
	// batch (server-context.cpp:3679-3685). Default 512.
	NBatch int
	// ChatTemplate is served as /props chat_template. The fake renders its
	// Go port of the keep-thinking template whatever this says.
	ChatTemplate string
	// DropEarlierThinking renders as the upstream Qwen3.5 template does
	// (data/qwen3.5-chat-template.jinja, line 100): thinking blocks of turns
	// before the last user message are dropped, so each new user turn
	// re-reads from the first such turn. The self-test must catch this.
	DropEarlierThinking bool
	// BuildInfo is /props build_info and every chunk's system_fingerprint,
	// "b<build>-<commit>". Default "b10587-3f545bec".
	BuildInfo string
	// ModelAlias is the model's name: POST bodies must name it, and chunks
	// carry it as "model". Default "fake-model".
	ModelAlias string
	// LoadTime is how long the model takes to load after [Server.Unload].
	LoadTime time.Duration
	// PingInterval is the default sse_ping_interval. Zero means the real
	// default of 30 s (server-context.cpp:4339); negative disables pings.
	PingInterval time.Duration
	// Vision is /props modalities.vision (tools/server/server-context.cpp,
	// the /props handler, lines 4460-4505: {"vision",
	// oai_parser_opt.allow_image}), which llama-server sets when the model
	// was loaded with a multimodal projector that supports vision
	// (--mmproj). Default false, as for a text-only model.
	Vision bool
	// Seed, when non-zero, makes completion and tool-call ids reproducible.
	Seed uint64
	// Now gives each completion's "created" time. Default time.Now.
	Now func() time.Time
	// PromptCache models the host-RAM prompt cache (--cache-ram with
	// --cache-idle-slots, both on upstream by default: promptcache.go).
	// Default off, so that an eviction is a loss.
	PromptCache bool
}

// Server is a fake llama-server on an httptest server. Its methods are safe
// for concurrent use. It is closed by the test's Cleanup.
type Server struct {
	t    testing.TB
	opts Options
	hs   *httptest.Server
	// ctx is cancelled at cleanup, so that no handler outlives the test.
	ctx  context.Context
	stop context.CancelFunc

	mu sync.Mutex
	// The fields below are guarded by mu.
	slots    []*slot
	freed    chan struct{} // closed and replaced each time a slot frees
	script   []Reply
	chooser  func(body []byte) (Reply, bool) // see Respond
	rng      *rand.Rand
	tasks    int   // id of the last task started
	clock    int64 // orders slot use, for least-recently-used choice
	controls int
	loaded   bool
	loading  chan struct{}  // closed when the load under way ends; nil if none
	epoch    int            // bumped by Unload; a task from an older epoch caches nothing
	prompts  []cachedPrompt // the host-RAM prompt cache, oldest first (promptcache.go)
}

// New starts a fake server and registers its shutdown with t.Cleanup.
func New(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Slots <= 0 {
		opts.Slots = 2
	}
	if opts.NCtx <= 0 {
		opts.NCtx = 8192
	}
	if opts.NBatch <= 0 {
		opts.NBatch = 512
	}
	if opts.BuildInfo == "" {
		opts.BuildInfo = "b10587-3f545bec"
	}
	if opts.ModelAlias == "" {
		opts.ModelAlias = "fake-model"
	}
	if opts.ChatTemplate == "" {
		opts.ChatTemplate = "{# fake llama-server: Go port of qwen3.5-keep-thinking.jinja #}"
	}
	if opts.PingInterval == 0 {
		opts.PingInterval = 30 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	seed := opts.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	s := &Server{
		t:      t,
		opts:   opts,
		freed:  make(chan struct{}),
		rng:    rand.New(rand.NewPCG(seed, seed)),
		loaded: true,
	}
	for i := range opts.Slots {
		s.slots = append(s.slots, &slot{id: i, checkpoint: -1})
	}
	s.ctx, s.stop = context.WithCancel(context.Background())

	mux := http.NewServeMux()
	// Routes as registered upstream (server.cpp:246 for control; the
	// reference's §1 and §4 for the rest). Reference silent on the
	// un-prefixed /chat/completions alias; the fake serves only /v1.
	mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	mux.HandleFunc("POST /v1/chat/completions/control", s.handleControl)
	mux.HandleFunc("POST /v1/chat/completions/input_tokens", s.handleInputTokens)
	mux.HandleFunc("GET /health", s.handleHealth)
	mux.HandleFunc("GET /v1/health", s.handleHealth)
	mux.HandleFunc("GET /props", s.handleProps)
	mux.HandleFunc("GET /slots", s.handleSlots)
	mux.HandleFunc("POST /tokenize", s.handleTokenize)
	mux.HandleFunc("GET /models", s.handleModels) // models.go
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.HandleFunc("POST /models/load", s.handleModelsLoad)
	s.hs = httptest.NewServer(mux)
	t.Cleanup(func() {
		s.stop()
		s.hs.CloseClientConnections()
		s.hs.Close()
	})
	return s
}

// URL is the server's base URL, without a trailing slash.
func (s *Server) URL() string { return s.hs.URL }

// LastRequest returns the body of the last chat request that reached slot
// (modulo the slot count), as sent, or nil. Tests decode it to check, for
// instance, that temperature, top_p and top_k were sent.
func (s *Server) LastRequest(slot int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.slots[s.slotIndex(slot)].lastBody...)
}

// Requests returns the body of every chat request that reached slot
// (modulo the slot count), in the order they got the slot, as sent.
func (s *Server) Requests(slot int) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][]byte
	for _, b := range s.slots[s.slotIndex(slot)].bodies {
		out = append(out, append([]byte(nil), b...))
	}
	return out
}

// ControlCalls counts the requests received on
// /v1/chat/completions/control, whatever their outcome.
func (s *Server) ControlCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.controls
}

func (s *Server) slotIndex(i int) int {
	n := len(s.slots)
	return ((i % n) + n) % n
}

// requestContext ends when the client goes away or the test ends.
func (s *Server) requestContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

const alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// randomID returns 32 random [0-9A-Za-z], the form of completion and tool
// call ids (server-common.cpp:109-111).
func (s *Server) randomID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := make([]byte, 32)
	for i := range b {
		b[i] = alnum[s.rng.IntN(len(alnum))]
	}
	return string(b)
}

// route copies what the router does before a request reaches the model's
// child: POST requests route on the body's "model", GET requests on
// ?model= (server-models.cpp:1801-1818, 1900-1943); ?autoload=false
// refuses an unloaded model (:1820-1827); otherwise the request blocks,
// sending nothing, until the model has loaded (server-models.cpp:1369-1487).
// Reference silent on GET without ?model=: the router answers some of
// those itself; the fake always answers as the model's child.
func (s *Server) route(ctx context.Context, w http.ResponseWriter, r *http.Request, fields map[string]json.RawMessage) bool {
	model := r.URL.Query().Get("model")
	if r.Method == http.MethodPost {
		model = jsonString(fields, "model", "")
		if model == "" {
			// server-models.cpp:1914-1922: the router needs the name.
			writeError(w, errInvalid("model name is missing from the request"))
			return false
		}
	}
	if model != "" && model != s.opts.ModelAlias {
		writeError(w, errInvalid(fmt.Sprintf("model '%s' not found", model)))
		return false
	}
	if r.URL.Query().Get("autoload") == "false" {
		s.mu.Lock()
		loaded := s.loaded
		s.mu.Unlock()
		if !loaded {
			writeError(w, errInvalid("model is not loaded"))
			return false
		}
	}
	return s.waitLoaded(ctx) == nil
}

// handleHealth copies GET /health when ready (server-context.cpp:4515-4526).
// The fake never answers the child's 503 "Loading model"
// (server-http.cpp:253-272): behind the router a request waits instead.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

type modalities struct {
	Vision bool `json:"vision"`
	Video  bool `json:"video"`
	Audio  bool `json:"audio"`
}

type generationSettings struct {
	Params samplingParams `json:"params"`
	NCtx   int            `json:"n_ctx"`
}

// propsJSON copies the keys and order of GET /props
// (server-context.cpp:4460-4505). Reference silent on most values; the fake
// describes a Qwen-family Q4_K_M model without vision.
type propsJSON struct {
	DefaultGenerationSettings generationSettings `json:"default_generation_settings"`
	TotalSlots                int                `json:"total_slots"`
	ModelAlias                string             `json:"model_alias"`
	ModelFtype                string             `json:"model_ftype"`
	ModelPath                 string             `json:"model_path"`
	Modalities                modalities         `json:"modalities"`
	MediaMarker               string             `json:"media_marker"`
	EndpointSlots             bool               `json:"endpoint_slots"`
	EndpointProps             bool               `json:"endpoint_props"`
	EndpointMetrics           bool               `json:"endpoint_metrics"`
	UI                        bool               `json:"ui"`
	UISettings                struct{}           `json:"ui_settings"`
	ChatTemplate              string             `json:"chat_template"`
	ChatTemplateCaps          struct{}           `json:"chat_template_caps"`
	BOSToken                  string             `json:"bos_token"`
	EOSToken                  string             `json:"eos_token"`
	BuildInfo                 string             `json:"build_info"`
	IsSleeping                bool               `json:"is_sleeping"`
	CORSProxyEnabled          bool               `json:"cors_proxy_enabled"`
}

func (s *Server) handleProps(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.requestContext(r)
	defer cancel()
	if !s.route(ctx, w, r, nil) {
		return
	}
	writeJSON(w, http.StatusOK, propsJSON{
		// n_ctx here is the per-slot context (reference §4).
		DefaultGenerationSettings: generationSettings{Params: defaultSampling, NCtx: s.opts.NCtx},
		TotalSlots:                s.opts.Slots,
		ModelAlias:                s.opts.ModelAlias,
		ModelFtype:                "Q4_K - Medium",
		ModelPath:                 "/models/" + s.opts.ModelAlias + ".gguf",
		MediaMarker:               mediaMarker,
		Modalities:                modalities{Vision: s.opts.Vision},
		EndpointSlots:             true,
		UI:                        true,
		ChatTemplate:              s.opts.ChatTemplate,
		BOSToken:                  "<|endoftext|>",
		EOSToken:                  eosPiece,
		BuildInfo:                 s.opts.BuildInfo,
	})
}

// handleInputTokens copies POST /v1/chat/completions/input_tokens: the
// prompt rendered exactly as a chat request would be, counted
// (server-context.cpp handle_count_tokens).
func (s *Server) handleInputTokens(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.requestContext(r)
	defer cancel()
	_, _, prompt, ok := s.renderRequest(ctx, w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, struct {
		InputTokens int    `json:"input_tokens"`
		Object      string `json:"object"`
	}{len(tokenize(prompt, true)), "response.input_tokens"})
}

// renderError maps a template failure to its answer: a raise_exception is
// a runtime_error, so a 500; bad tool-call arguments are the client's
// fault, and the fake (reference silent) answers 400.
func renderError(err error) *apiError {
	if _, ok := err.(templateError); ok {
		return errServer(err.Error())
	}
	return errInvalid(err.Error())
}
