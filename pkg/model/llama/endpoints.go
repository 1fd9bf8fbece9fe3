package llama

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// Props is GET /props of a single-model server, or of the model's child in
// router mode. reference: server-context.cpp:4460-4505. Raw fields are kept
// raw because the self-test compares them with recorded values and the
// client has no use for their inside.
type Props struct {
	DefaultGenerationSettings struct {
		Params json.RawMessage `json:"params"`
		NCtx   int             `json:"n_ctx"` // per slot
	} `json:"default_generation_settings"`
	TotalSlots int    `json:"total_slots"`
	ModelAlias string `json:"model_alias"`
	ModelFtype string `json:"model_ftype"`
	ModelPath  string `json:"model_path"`
	Modalities struct {
		Vision bool `json:"vision"`
		Video  bool `json:"video"`
		Audio  bool `json:"audio"`
	} `json:"modalities"`
	MediaMarker         string          `json:"media_marker"`
	EndpointSlots       bool            `json:"endpoint_slots"`
	EndpointProps       bool            `json:"endpoint_props"`
	EndpointMetrics     bool            `json:"endpoint_metrics"`
	UI                  bool            `json:"ui"`
	UISettings          json.RawMessage `json:"ui_settings"`
	ChatTemplate        string          `json:"chat_template"`
	ChatTemplateCaps    json.RawMessage `json:"chat_template_caps"`
	ChatTemplateToolUse string          `json:"chat_template_tool_use"` // only if the model has one
	BOSToken            string          `json:"bos_token"`
	EOSToken            string          `json:"eos_token"`
	BuildInfo           string          `json:"build_info"` // "b<build>-<commit>"
	IsSleeping          bool            `json:"is_sleeping"`
	CORSProxyEnabled    bool            `json:"cors_proxy_enabled"`

	// Set only by a router answering for itself (server-models.cpp:1873-1898).
	Role           string `json:"role"`
	MaxInstances   int    `json:"max_instances"`
	ModelsAutoload bool   `json:"models_autoload"`
}

// SlotContext is the per-slot context size.
func (p *Props) SlotContext() int { return p.DefaultGenerationSettings.NCtx }

// Slot is one element of GET /slots. reference: server-context.cpp:640-674.
// The fields from IDTask on are present only once the slot has had a task.
type Slot struct {
	ID                     int             `json:"id"`
	NCtx                   int             `json:"n_ctx"`
	Speculative            bool            `json:"speculative"`
	IsProcessing           bool            `json:"is_processing"`
	IDTask                 int             `json:"id_task"`
	NPromptTokens          int             `json:"n_prompt_tokens"`
	NPromptTokensProcessed int             `json:"n_prompt_tokens_processed"`
	NPromptTokensCache     int             `json:"n_prompt_tokens_cache"`
	Params                 json.RawMessage `json:"params"`
	NextToken              []NextToken     `json:"next_token"`
}

// NextToken is an element of Slot.NextToken.
type NextToken struct {
	HasNextToken bool `json:"has_next_token"`
	HasNewLine   bool `json:"has_new_line"`
	NRemain      int  `json:"n_remain"`
	NDecoded     int  `json:"n_decoded"`
}

// modelQuery routes a request to the configured model in router mode without
// loading it: GET /props?model=X and /slots?model=X load the model unless
// autoload=false, which the router honours per request (reference:
// server-models.cpp:1820-1827). POSTs route on the body's "model" and get
// autoload=false too. A single-model server ignores both parameters.
//
// None of these calls may load a model: the liveness probe must not cause
// the load it is trying to detect, and a model load belongs to a completion,
// which has the model-load limit for it.
func (c *Client) modelQuery() url.Values {
	return url.Values{"model": {c.model}, "autoload": {"false"}}
}

// Health returns nil when GET /health answers {"status":"ok"}. While the
// model loads the server answers 503 unavailable_error, returned as a
// *ServerError (reference: server-http.cpp:253-272).
func (c *Client) Health(ctx context.Context) error {
	var h struct {
		Status string `json:"status"`
	}
	if err := c.call(ctx, "health", http.MethodGet, "/health", nil, nil, &h); err != nil {
		return err
	}
	if h.Status != "ok" {
		return fmt.Errorf("health: status %s", clip(h.Status))
	}
	return nil
}

// Props returns the server's /props for the configured model. In router mode
// it never triggers a model load; an unloaded model is a *ServerError.
func (c *Client) Props(ctx context.Context) (*Props, error) {
	var p Props
	if err := c.call(ctx, "props", http.MethodGet, "/props", c.modelQuery(), nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Slots returns the server's /slots for the configured model, without
// loading it. A server started with --no-slots answers 501.
func (c *Client) Slots(ctx context.Context) ([]Slot, error) {
	var s []Slot
	if err := c.call(ctx, "slots", http.MethodGet, "/slots", c.modelQuery(), nil, &s); err != nil {
		return nil, err
	}
	return s, nil
}

// slotBusy reports whether the pinned slot is processing a request, which
// is how the liveness watchdog tells a queued request from a model load.
func (c *Client) slotBusy(ctx context.Context) (bool, error) {
	slots, err := c.Slots(ctx)
	if err != nil {
		return false, err
	}
	return slotIsBusy(slots, c.slot), nil
}

// slotIsBusy: an id_slot out of range wraps modulo the slot count
// (reference: server-context.cpp:1416-1426); an unpinned request (-1) waits
// only while every slot is busy.
func slotIsBusy(slots []Slot, id int) bool {
	if len(slots) == 0 {
		return false
	}
	if id < 0 {
		for _, s := range slots {
			if !s.IsProcessing {
				return false
			}
		}
		return true
	}
	id %= len(slots)
	for _, s := range slots {
		if s.ID == id {
			return s.IsProcessing
		}
	}
	return false
}

// tokenizeRequest is the body of POST /tokenize; the values sent are the
// server's defaults, spelled out so the request means the same on any build.
// reference: server-context.cpp:4945-4984.
type tokenizeRequest struct {
	Content      string `json:"content"`
	AddSpecial   bool   `json:"add_special"`
	ParseSpecial bool   `json:"parse_special"`
	WithPieces   bool   `json:"with_pieces"`
	Model        string `json:"model"` // routes the POST in router mode
}

// Tokenize returns the server's tokens for text, without BOS and with
// special-token text (chat template tags) parsed as special tokens, which is
// how the template's output is tokenized. In router mode the model must be
// loaded already.
func (c *Client) Tokenize(ctx context.Context, text string) ([]int, error) {
	var out struct {
		Tokens []int `json:"tokens"`
	}
	req := tokenizeRequest{Content: text, ParseSpecial: true, Model: c.model}
	if err := c.call(ctx, "tokenize", http.MethodPost, "/tokenize", c.modelQuery(), req, &out); err != nil {
		return nil, err
	}
	return out.Tokens, nil
}

// MaxTokens is the max_tokens the client sends when a request names none
// (the configured value, or DefaultMaxTokens).
func (c *Client) MaxTokens() int { return c.maxTokens }

// InputTokens is the size in tokens of the prompt req renders to, as the
// server counts it (POST /v1/chat/completions/input_tokens renders the
// chat template exactly as a chat request would; reference:
// server-context.cpp handle_count_tokens). Nothing is generated.
func (c *Client) InputTokens(ctx context.Context, req Request) (int, error) {
	body, err := c.chatBody(req)
	if err != nil {
		return 0, fmt.Errorf("input tokens: %w", err)
	}
	var out struct {
		InputTokens int    `json:"input_tokens"`
		Object      string `json:"object"`
	}
	if err := c.call(ctx, "input tokens", http.MethodPost, "/v1/chat/completions/input_tokens", c.modelQuery(), json.RawMessage(body.bytes()), &out); err != nil {
		return 0, err
	}
	if out.InputTokens <= 0 {
		return 0, fmt.Errorf("input tokens: the server counted %d tokens", out.InputTokens)
	}
	return out.InputTokens, nil
}

// EndReasoning asks the server to end the thinking block of the live
// completion id (POST /v1/chat/completions/control, action reasoning_end).
// It returns an error if the server answers success:false, e.g. "no active
// completion for this id". Complete calls it for the thinking cap; the
// self-test may call it directly. reference: server-task.h:538-549.
func (c *Client) EndReasoning(ctx context.Context, id string) error {
	const op = "reasoning control"
	var resp controlResponse
	req := controlRequest{ID: id, Action: "reasoning_end", Model: c.model}
	if err := c.call(ctx, op, http.MethodPost, "/v1/chat/completions/control", c.modelQuery(), req, &resp); err != nil {
		return err
	}
	if !resp.Success {
		return fmt.Errorf("%s: server declined: %s", op, clip(resp.Message))
	}
	return nil
}
