package memd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// TestTieringCounts: each recall counts, per identity entry, when the
// entry holds every word of the query; tiering_stats on memory.sock
// returns memory.md's and user.md's entries in file order with their
// counts and last-found times; a rewritten entry starts from zero; the
// request is refused on memtool.sock (brokerd's) as another socket's.
func TestTieringCounts(t *testing.T) {
	h := start(t)
	for _, text := range []string{"The owner deploys with nixos-rebuild on straylight.", "Tea is sencha, never sweetened."} {
		r := h.tool(t, "s1", "memory", `{"action":"add","file":"memory","text":"`+text+`"}`, dataclass.Private, false)
		require.Equal(t, wire.StatusRan, r.Status, r.Output)
	}
	h.tool(t, "s1", "memory", `{"action":"add","file":"user","text":"Prefers answers in one paragraph."}`, dataclass.Private, false)
	for _, q := range []string{"what deploys with nixos-rebuild", "Deploys straylight", "sencha", "nothing matches"} {
		h.tool(t, "s2", "recall", `{"query":"`+q+`"}`, dataclass.Private, false)
	}
	st, ok := h.ask(t, h.cfg.MemorySocketDir, &wire.Memory, &wire.TieringRequest{Session: "job-memory-tiering-1"}).(*wire.TieringStats)
	require.True(t, ok)
	require.Len(t, st.Files, 2)
	mem := st.Files[0]
	require.Equal(t, "memory.md", mem.File)
	require.Len(t, mem.Entries, 2)
	require.Equal(t, int64(2), mem.Entries[0].Hits, "deploy entry")
	require.NotEmpty(t, mem.Entries[0].LastFound)
	require.Equal(t, int64(1), mem.Entries[1].Hits, "sencha entry")
	require.Equal(t, "user.md", st.Files[1].File)
	require.Equal(t, int64(0), st.Files[1].Entries[0].Hits)
	require.Equal(t, "", st.Files[1].Entries[0].LastFound)

	r := h.tool(t, "s1", "memory", `{"action":"replace","file":"memory","old":"sencha","text":"Tea is gyokuro now."}`, dataclass.Private, false)
	require.Equal(t, wire.StatusRan, r.Status, r.Output)
	st = h.ask(t, h.cfg.MemorySocketDir, &wire.Memory, &wire.TieringRequest{Session: "job-memory-tiering-2"}).(*wire.TieringStats)
	require.Equal(t, int64(0), st.Files[0].Entries[1].Hits, "a rewritten entry kept the old entry's count")

	if e, ok := h.ask(t, h.cfg.MemtoolSocketDir, &wire.Memtool, &wire.TieringRequest{Session: "s"}).(*wire.Error); !ok || e.Kind != wire.Forbidden {
		t.Errorf("tiering_request on memtool.sock = %#v, want forbidden", e)
	}
}
