package llama

import (
	"context"
	"net/http"
	"time"
)

// slot is one of the server's slots. Its fields are guarded by Server.mu.
type slot struct {
	id   int
	busy bool
	// cache holds the pieces of the slot's last sequence: prompt, then the
	// generated reply.
	cache []string
	// evaluated counts the leading pieces of cache whose state the slot
	// holds. The last sampled token is never decoded, so after a reply it
	// is len(cache)-1 (reference, "Observed live": "The last sampled token
	// is never in the cache (a gap of 1 is normal)").
	evaluated int
	// checkpoint is the position of the slot's context checkpoint, or -1.
	checkpoint int
	lastUsed   int64
	lastBody   []byte
	bodies     [][]byte // every chat request body that reached the slot, in order
	// task is the running or last task; nil if the slot never had one.
	task *task
}

// task is one request on a slot, as /slots and the control endpoint see it.
// Its fields are guarded by Server.mu.
type task struct {
	id           int
	cmplID       string
	armed        bool // reasoning_control was set
	processing   bool
	endReasoning bool // a reasoning_end control call arrived
	epoch        int
	cancel       context.CancelFunc
	nPrompt      int
	nProcessed   int // prompt tokens processed by this task, cache excluded
	nCache       int
	nDecoded     int
	nPredict     int
	newLine      bool
	params       samplingParams
}

// acquire waits for the model, then for a slot, and starts t on it. id_slot
// wraps modulo the slot count; a busy slot defers the task rather than
// rejecting it (server-context.cpp:4184, 1416-1426, 2284-2289), and a
// deferred request receives no bytes at all, not even headers, until the
// slot frees (reference, "Observed live"). Checking the model again here,
// under the same lock that starts the task, means an Unload either happens
// before the task starts or cancels it.
func (s *Server) acquire(ctx context.Context, want int, prompt []string, t *task) (*slot, error) {
	for {
		s.mu.Lock()
		if !s.loaded {
			s.mu.Unlock()
			if err := s.waitLoaded(ctx); err != nil {
				return nil, err
			}
			continue
		}
		if sl := s.pick(want, prompt); sl != nil {
			if want >= 0 {
				s.updateCache(sl, prompt)
			}
			sl.busy = true
			s.saveIdle()
			s.tasks++
			t.id, t.epoch, t.processing = s.tasks, s.epoch, true
			sl.task = t
			s.mu.Unlock()
			return sl, nil
		}
		freed := s.freed
		s.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// pick chooses an idle slot, or nil. Reference silent on how id_slot -1
// chooses: the fake takes the idle slot sharing the longest prefix with
// the prompt, then the least recently used, as llama-server's
// get_available_slot does by prompt similarity and LRU.
func (s *Server) pick(want int, prompt []string) *slot {
	if want >= 0 {
		sl := s.slots[s.slotIndex(want)]
		if sl.busy {
			return nil
		}
		return sl
	}
	var best *slot
	bestLCP := -1
	for _, sl := range s.slots {
		if sl.busy {
			continue
		}
		n := commonPrefix(sl.cache[:sl.evaluated], prompt)
		if n > bestLCP || n == bestLCP && sl.lastUsed < best.lastUsed {
			best, bestLCP = sl, n
		}
	}
	return best
}

// release frees sl after t. When keep is false the slot's cache becomes
// seq (of which evaluated pieces are decoded) with checkpoint cp; a task
// begun before an Unload caches nothing, since the model it ran on is gone.
func (s *Server) release(sl *slot, t *task, keep bool, seq []string, evaluated, cp int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !keep && t.epoch == s.epoch {
		sl.cache, sl.evaluated, sl.checkpoint = seq, evaluated, cp
	}
	t.processing = false
	sl.busy = false
	s.clock++
	sl.lastUsed = s.clock
	close(s.freed)
	s.freed = make(chan struct{})
}

// reuse returns how many prompt pieces the slot can keep (cache_n).
//
// An exact continuation keeps everything decoded, which is the previous
// total minus the last sampled token. Anything else needs a rewind, which
// hybrid/recurrent memory cannot do (reference §7): the slot restores its
// checkpoint if the prompt still matches up to it, else it re-reads the
// whole prompt, logging "forcing full prompt re-processing due to lack of
// cache data" (server-context.cpp:3223-3258). At least one prompt token is
// always processed, to produce logits.
func reuse(sl *slot, prompt []string) int {
	n := commonPrefix(sl.cache[:sl.evaluated], prompt)
	if n == sl.evaluated && n < len(prompt) {
		return n
	}
	if sl.checkpoint >= 0 && sl.checkpoint <= n && sl.checkpoint < len(prompt) {
		return sl.checkpoint
	}
	return 0
}

// checkpointAfter returns the slot's checkpoint once a prompt of n pieces,
// of which cacheN were reused, has been processed. The server checkpoints
// 4 tokens before the end of the prompt (server-context.cpp:3422-3450).
// The fake keeps only that one: checkpoints at user-message boundaries and
// at 4+n_ubatch are not modelled, and with --checkpoint-min-step 8192
// (common/common.h:614-615) few exist in a short conversation, so any
// earlier divergence re-reads everything, as the brief requires.
func checkpointAfter(old, cacheN, n int) int {
	if n-4 > cacheN {
		return n - 4
	}
	if old <= cacheN {
		return old
	}
	return -1
}

func commonPrefix(a, b []string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// Evict makes another client take slot (modulo the slot count): it waits,
// as that client's request would, for the model and for the slot to be
// idle, and then leaves the other client's sequence in its cache. The
// harness's next request on the slot re-reads its whole prompt, unless
// [Options.PromptCache] is on: then the other client's request saved the
// slot's sequence in the host-RAM prompt cache (promptcache.go), from
// which the harness's next request restores it.
func (s *Server) Evict(slot int) {
	other := tokenize("<|im_start|>user\nA request from another client.<|im_end|>\n"+assistantHeader, true)
	t := &task{nPrompt: len(other), nProcessed: len(other), nPredict: -1, params: defaultSampling}
	sl, err := s.acquire(s.ctx, s.slotIndex(slot), other, t)
	if err != nil {
		return
	}
	s.release(sl, t, false, other, len(other), checkpointAfter(-1, 0, len(other)))
}

// Unload unloads the model, as the router does after an idle timeout or to
// make room for another model. Every slot's cache is lost, running streams
// end without [DONE], and the next request waits Options.LoadTime, with no
// bytes sent, for the model to load again (server-models.cpp:1369-1487).
func (s *Server) Unload() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loaded = false
	s.loading = nil
	s.epoch++
	s.prompts = nil // the model's process, and its host-RAM cache, are gone
	for _, sl := range s.slots {
		sl.cache, sl.evaluated, sl.checkpoint = nil, 0, -1
		if t := sl.task; t != nil && t.processing && t.cancel != nil {
			t.cancel()
		}
	}
}

// waitLoaded blocks until the model is loaded, starting the load if none is
// under way; the router polls until the status is "loaded"
// (server-models.cpp:1369-1487).
func (s *Server) waitLoaded(ctx context.Context) error {
	for {
		ch := s.startLoad()
		if ch == nil {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// startLoad starts loading the model unless it is loaded or loading, and
// returns the channel closed when the load under way ends, or nil when the
// model is loaded. The load takes Options.LoadTime.
func (s *Server) startLoad() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loaded {
		return nil
	}
	if s.loading == nil {
		ch := make(chan struct{})
		s.loading = ch
		time.AfterFunc(s.opts.LoadTime, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			// An Unload during the load starts it over.
			if s.loading == ch {
				s.loaded, s.loading = true, nil
			}
			close(ch)
		})
	}
	return s.loading
}

type nextTokenJSON struct {
	HasNextToken bool `json:"has_next_token"`
	HasNewLine   bool `json:"has_new_line"`
	NRemain      int  `json:"n_remain"`
	NDecoded     int  `json:"n_decoded"`
}

// slotTaskJSON holds the /slots fields that appear only once the slot has
// had a task (server-context.cpp:640-674).
type slotTaskJSON struct {
	IDTask                 int             `json:"id_task"`
	NPromptTokens          int             `json:"n_prompt_tokens"`
	NPromptTokensProcessed int             `json:"n_prompt_tokens_processed"`
	NPromptTokensCache     int             `json:"n_prompt_tokens_cache"`
	Params                 samplingParams  `json:"params"`
	NextToken              []nextTokenJSON `json:"next_token"`
}

// slotJSON is one element of GET /slots (server-context.cpp:640-674). The
// prompt and generated fields need LLAMA_SERVER_SLOTS_DEBUG upstream and
// are not served.
type slotJSON struct {
	ID           int  `json:"id"`
	NCtx         int  `json:"n_ctx"`
	Speculative  bool `json:"speculative"`
	IsProcessing bool `json:"is_processing"`
	*slotTaskJSON
}

func (s *Server) handleSlots(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.requestContext(r)
	defer cancel()
	if !s.route(ctx, w, r, nil) {
		return
	}
	s.mu.Lock()
	out := make([]slotJSON, len(s.slots))
	idle := false
	for i, sl := range s.slots {
		out[i] = slotJSON{ID: sl.id, NCtx: s.opts.NCtx}
		idle = idle || !sl.busy
		t := sl.task
		if t == nil {
			continue
		}
		out[i].IsProcessing = t.processing
		remain := -1
		if t.nPredict >= 0 {
			remain = t.nPredict - t.nDecoded
		}
		out[i].slotTaskJSON = &slotTaskJSON{
			IDTask:                 t.id,
			NPromptTokens:          t.nPrompt,
			NPromptTokensProcessed: t.nProcessed,
			NPromptTokensCache:     t.nCache,
			Params:                 t.params,
			NextToken: []nextTokenJSON{{
				HasNextToken: t.processing,
				HasNewLine:   t.newLine,
				NRemain:      remain,
				NDecoded:     t.nDecoded,
			}},
		}
	}
	s.mu.Unlock()
	// ?fail_on_no_slot=1 answers 503 when no slot is idle (reference §4).
	// Reference silent on the message.
	if r.URL.Query().Get("fail_on_no_slot") == "1" && !idle {
		writeError(w, errUnavailable("no slot available"))
		return
	}
	writeJSON(w, http.StatusOK, out)
}
