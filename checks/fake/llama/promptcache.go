package llama

// The host-RAM prompt cache (--cache-ram, reference §7), modelled when
// [Options.PromptCache] is on. Upstream (tools/server at 3f545becc) it is on
// by default (--cache-ram 8192 MiB, common/common.h:616) together with
// --cache-idle-slots (common/common.h:613); the fake leaves it off unless a
// test asks, so that [Server.Evict] stays a cache loss for the tests that
// model one. What it copies:
//
//   - A task that asks for a slot by id runs get_available_slot's cache
//     update on that slot first (server-context.cpp:1443-1556): with
//     --slot-prompt-similarity 0.1 (common/common.h:678), a slot whose
//     longest common prefix with the new prompt is over a tenth of the
//     prompt keeps f_keep = lcp / its length, any other f_keep = 0; when
//     f_keep < 0.5 the slot's sequence is saved and the best entry loaded.
//     An empty slot never updates: f_keep is 0/0, NaN, which is not < 0.5.
//   - Right after a task starts, every idle slot's sequence is saved
//     (server-context.cpp:2309-2323); the task's own slot is busy then.
//   - Saving (prompt_save, server-context.cpp:253-277, and alloc,
//     server-task.cpp:1711-1791) skips a sequence that is a prefix of an
//     entry, and removes the entries that are prefixes of the new one.
//   - Loading (server-task.cpp:1793-1867) takes the entry with both a
//     higher f_keep (lcp / the entry's length, at least 0.25) and a higher
//     f_sim (lcp / the prompt's length) than the slot's own, best first,
//     and moves it, checkpoint included, out of the cache into the slot.
//
// Not modelled: the size and token limits (update, server-task.cpp:
// 1870-1905), so no entry is ever evicted; id_slot -1 (loopd always pins a
// slot); the clearing of idle slots with a unified KV cache (kv_unified,
// the server's default only when -np is not given, server.cpp:152-157).

// similarityThreshold is --slot-prompt-similarity's default
// (common/common.h:678).
const similarityThreshold = 0.1

// cachedPrompt is one entry of the prompt cache: the pieces whose state
// was saved, and the slot's checkpoint with them.
type cachedPrompt struct {
	seq        []string
	checkpoint int
}

// updateCache is get_available_slot's cache update for a task that asked
// for sl by id. s.mu is held.
func (s *Server) updateCache(sl *slot, prompt []string) {
	if !s.opts.PromptCache || len(prompt) == 0 {
		return
	}
	held := sl.cache[:sl.evaluated]
	if len(held) == 0 {
		return
	}
	lcp := commonPrefix(held, prompt)
	keep := 0.0
	if float64(lcp)/float64(len(prompt)) > similarityThreshold {
		keep = float64(lcp) / float64(len(held))
	}
	if keep >= 0.5 {
		return
	}
	s.savePrompt(sl)
	s.loadPrompt(sl, prompt)
}

// saveIdle saves every idle slot, as the server does once a task has
// started. s.mu is held.
func (s *Server) saveIdle() {
	if !s.opts.PromptCache {
		return
	}
	for _, sl := range s.slots {
		if !sl.busy {
			s.savePrompt(sl)
		}
	}
}

// savePrompt saves sl's sequence. s.mu is held.
func (s *Server) savePrompt(sl *slot) {
	held := sl.cache[:sl.evaluated]
	if len(held) == 0 {
		return
	}
	kept := s.prompts[:0]
	for _, e := range s.prompts {
		if commonPrefix(e.seq, held) == len(held) {
			return // already in the cache (server-task.cpp:1713-1720)
		}
	}
	for _, e := range s.prompts {
		if commonPrefix(e.seq, held) != len(e.seq) {
			kept = append(kept, e)
		}
	}
	s.prompts = append(kept, cachedPrompt{seq: append([]string(nil), held...), checkpoint: sl.checkpoint})
}

// loadPrompt moves the entry that suits prompt best into sl, if one is
// better than what sl holds. s.mu is held.
func (s *Server) loadPrompt(sl *slot, prompt []string) {
	held := sl.cache[:sl.evaluated]
	lcp := commonPrefix(held, prompt)
	keepBest := -1.0 // an empty slot: any entry wins
	if len(held) > 0 {
		keepBest = float64(lcp) / float64(len(held))
	}
	simBest := float64(lcp) / float64(len(prompt))
	best := -1
	for i, e := range s.prompts {
		n := commonPrefix(e.seq, prompt)
		keep, sim := float64(n)/float64(len(e.seq)), float64(n)/float64(len(prompt))
		if keep < 0.25 {
			continue // "don't trash large prompts"
		}
		if keepBest < keep && simBest < sim {
			keepBest, simBest, best = keep, sim, i
		}
	}
	if best < 0 {
		return
	}
	e := s.prompts[best]
	sl.cache, sl.evaluated, sl.checkpoint = e.seq, len(e.seq), e.checkpoint
	s.prompts = append(s.prompts[:best], s.prompts[best+1:]...)
}
