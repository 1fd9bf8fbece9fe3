package llama

import (
	"strings"
	"testing"
)

// background sends one request on slot 1, with the test tools or none,
// and returns its result.
func background(t *testing.T, srv *Server, reply Reply, tools bool, msgs ...map[string]any) result {
	t.Helper()
	srv.Script(reply)
	extra := map[string]any{"id_slot": 1, "stream_options": map[string]any{"include_usage": true}}
	if tools {
		extra["tools"] = toolsFixture
	}
	res := stream(t, srv, chatBody(msgs, extra))
	if !res.done {
		t.Fatalf("background request ended without [DONE]")
	}
	return res
}

// epochOnSlot0 runs a two-turn conversation on slot 0 with a long system
// message and leaves slot 1 holding a short request with the same system
// message (as the self-test or a job leaves the background slot). It
// returns the conversation and its last result.
func epochOnSlot0(t *testing.T, srv *Server) (*conversation, result) {
	t.Helper()
	system := msg("system", strings.Repeat("You are a careful assistant who keeps notes. ", 40))
	c := newConversation(t, srv)
	c.turn(Reply{Reasoning: "Greet.", Content: "Hello."}, system, msg("user", "Hi"))
	last, _ := c.turn(Reply{Reasoning: "Answer.", Content: "It is noon."}, msg("user", "What time is it?"))
	background(t, srv, Reply{Content: "Other."}, true, system, msg("user", "Another short request."))
	return c, last
}

// TestPromptCacheSummary: a request on slot 1 that extends slot 0's
// conversation re-reads it, because slot 1 keeps over half of what it
// holds (f_keep >= 0.5, no cache update) and so only rewinds to the shared
// system message, which hybrid memory cannot do (the fake re-reads all of
// it; the real tiny model, a plain transformer, re-reads from there); after
// a short unrelated request on slot 1 (the staging request), which saved
// the idle slot 0 into the cache and left slot 1 dissimilar, the same
// request restores slot 0's sequence and reads only its own tail.
func TestPromptCacheSummary(t *testing.T) {
	for _, staged := range []bool{false, true} {
		srv := New(t, Options{PromptCache: true})
		c, last := epochOnSlot0(t, srv)
		if staged {
			background(t, srv, Reply{Content: "word"}, false, msg("user", "Stage."))
		}
		msgs := append(c.msgs, msg("user", "Summarise."))
		sum := background(t, srv, Reply{Content: "A summary."}, true, msgs...)
		got, epoch := cacheN(sum), last.total()-1
		if staged && got != epoch {
			t.Errorf("staged: the summary's cache_n = %d, want slot 0's whole sequence, %d", got, epoch)
		}
		if !staged && got != 0 {
			t.Errorf("not staged: the summary's cache_n = %d, want 0 (a rewind, then a full re-read)", got)
		}
	}
}

// TestPromptCacheOff: without the cache the staging request changes
// nothing, and an eviction is a loss (TestEvictLosesCache).
func TestPromptCacheOff(t *testing.T) {
	srv := New(t, Options{})
	c, last := epochOnSlot0(t, srv)
	background(t, srv, Reply{Content: "word"}, false, msg("user", "Stage."))
	sum := background(t, srv, Reply{Content: "A summary."}, true, append(c.msgs, msg("user", "Summarise."))...)
	if got := cacheN(sum); got >= last.total()-1 {
		t.Errorf("cache off: the summary's cache_n = %d, want less than slot 0's %d", got, last.total()-1)
	}
}

// TestPromptCacheRestoresEvicted: another client's request on the slot
// saves the conversation, and the conversation's next request restores it.
func TestPromptCacheRestoresEvicted(t *testing.T) {
	srv := New(t, Options{PromptCache: true})
	c := newConversation(t, srv)
	r1, _ := c.turn(Reply{Content: "One."}, msg("user", "First"))
	srv.Evict(0)
	r2, _ := c.turn(Reply{Content: "Two."}, msg("user", "Second"))
	if got, want := cacheN(r2), r1.total()-1; got != want {
		t.Errorf("cache_n = %d after an eviction with the prompt cache on, want %d", got, want)
	}
}

// TestPromptCacheEmptySlotNeverLoads: a slot asked for by id that holds
// nothing does not look in the cache (f_keep is 0/0), so it re-reads.
func TestPromptCacheEmptySlotNeverLoads(t *testing.T) {
	srv := New(t, Options{PromptCache: true})
	c := newConversation(t, srv)
	c.turn(Reply{Content: "One."}, msg("user", "First"))
	background(t, srv, Reply{Content: "Other."}, false, msg("user", "Anything.")) // saves slot 0
	c.extra["id_slot"] = 1
	c.msgs = c.msgs[:0]
	srv.mu.Lock()
	srv.slots[1].cache, srv.slots[1].evaluated, srv.slots[1].checkpoint = nil, 0, -1
	srv.mu.Unlock()
	r, _ := c.turn(Reply{Content: "Two."}, msg("user", "First"))
	if got := cacheN(r); got != 0 {
		t.Errorf("an empty slot: cache_n = %d, want 0", got)
	}
}
