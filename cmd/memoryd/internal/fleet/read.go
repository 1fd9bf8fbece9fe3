package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/cmd/memoryd/internal/honcho"
	"wntrmute.dev/boxmaker/cmd/memoryd/internal/recall"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd/honchoconf"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/text/truncate"
)

// Source is a workspace read, with the owner's trust in it: the agent's
// two and the others configured.
func (f *Fleet) sources() []honchoconf.Source {
	s := f.cfg.Honcho
	return append([]honchoconf.Source{{ID: s.Trusted, Trusted: true}, {ID: s.Untrusted}}, s.Others...)
}

// ReadBound is how long a read waits on Honcho.
func (f *Fleet) ReadBound() time.Duration { return f.cfg.Honcho.ReadBound }

// Reach is how far a read got.
type Reach struct {
	Asked, Answered int
	Failed          []string // the workspaces that did not answer in time, and why
}

// Reached reports whether every workspace answered.
func (r Reach) Reached() bool { return r.Answered == r.Asked }

// Search asks every workspace (the agent's, the others configured, and
// extra: the asking session's project's) for query at once, each for up to k hits,
// and waits at most the read bound. A hit from an untrusted workspace
// is memory-tainted whatever it says of itself; from a trusted one it
// keeps the source its writer gave it (identity for a moved entry). Its
// class is the one its metadata names, never below private (an entry
// without one is private: nothing above it is written).
func (f *Fleet) Search(ctx context.Context, query string, k int, extra ...honchoconf.Source) ([]recall.Hit, Reach) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Honcho.ReadBound)
	defer cancel()
	srcs := append(f.sources(), extra...)
	type answer struct {
		i    int
		hits []recall.Hit
		err  error
	}
	// Buffered: a search still running at the bound finishes into it and
	// is dropped; nothing waits for it.
	answers := make(chan answer, len(srcs))
	for i, src := range srcs {
		go func() {
			msgs, err := f.client.Search(ctx, honcho.Search{Workspace: src.ID}, query, k)
			a := answer{i: i, err: err}
			for _, m := range msgs {
				a.hits = append(a.hits, fleetHit(src, m))
			}
			answers <- a
		}()
	}
	got := make([]*answer, len(srcs))
	for n := 0; n < len(srcs); n++ {
		select {
		case a := <-answers:
			got[a.i] = &a
			continue
		case <-ctx.Done():
		}
		break
	}
	r := Reach{Asked: len(srcs)}
	var out []recall.Hit
	for i, a := range got {
		if a == nil || a.err != nil {
			why := "no answer within the read bound"
			if a != nil {
				why = a.err.Error()
			}
			r.Failed = append(r.Failed, srcs[i].ID.String())
			f.log.Warn("fleet memory: a workspace was not reached; see docs/runbook.md#fleet-memory-unreached", "workspace", srcs[i].ID.String(), "err", why)
			continue
		}
		r.Answered++
		out = append(out, a.hits...)
	}
	return out, r
}

func fleetHit(src honchoconf.Source, m honcho.Message) recall.Hit {
	var md map[string]json.RawMessage
	json.Unmarshal(m.Metadata, &md)
	str := func(k string) string {
		var s string
		json.Unmarshal(md[k], &s)
		return s
	}
	class := dataclass.Floor
	if c, err := dataclass.Parse(str("class")); err == nil {
		class = dataclass.Join(class, c)
	}
	source := recall.SourceTainted
	if src.Trusted {
		source = recall.SourceMemory
		if str("source") == recall.SourceIdentity {
			source = recall.SourceIdentity
		} else if str("source") == recall.SourceTainted {
			source = recall.SourceTainted
		}
	}
	snippet := truncate.Ellipsis(m.Content, recall.SnippetCap)
	h := recall.Hit{Doc: recall.Doc{Text: m.Content, Source: source, Class: class,
		Where: fmt.Sprintf("honcho workspace %s session %s peer %s", src.ID, m.Session, m.Peer)}, Snippet: snippet}
	h.Fleet = BoxmakerID(m.Metadata)
	return h
}

// Merge merges local hits with fleet hits, local first in turn, at most
// k in all; a fleet hit that is one of the local ones (the agent's own
// turn, read back) is dropped.
func Merge(local, fleet []recall.Hit, k int) []recall.Hit {
	seen := map[string]bool{}
	for _, h := range local {
		if h.Note == "" && h.Session != "" {
			seen[MessageID(h.Session, h.Epoch, h.Record)] = true
		} else if h.Note != "" {
			seen["note-"+h.Note] = true
		}
	}
	var rest []recall.Hit
	for _, h := range fleet {
		if h.Fleet != "" && seen[h.Fleet] {
			continue
		}
		rest = append(rest, h)
	}
	var out []recall.Hit
	for i := 0; len(out) < k && (i < len(local) || i < len(rest)); i++ {
		if i < len(local) {
			out = append(out, local[i])
		}
		if i < len(rest) && len(out) < k {
			out = append(out, rest[i])
		}
	}
	return out
}

// Asked is ask_memory's answer: each workspace's answer, the label of
// the whole (the most restrictive of the workspaces read), and how far
// it got.
type Asked struct {
	Answers   []WorkspaceAnswer
	Class     dataclass.Class
	Untrusted bool
	Reach     Reach
}

// WorkspaceAnswer is one workspace's answer.
type WorkspaceAnswer struct {
	Workspace string
	Trusted   bool
	Text      string // "" when it had nothing to say
}

// Ask asks the dialectic of every workspace (with extra, as [Fleet.Search]) about the speaker, at once,
// within the read bound. The dialectic's answer carries no provenance,
// so a workspace that answered labels the whole: one untrusted answer
// makes it untrusted.
func (f *Fleet) Ask(ctx context.Context, question string, extra ...honchoconf.Source) Asked {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Honcho.ReadBound)
	defer cancel()
	srcs := append(f.sources(), extra...)
	type answer struct {
		i   int
		ans honcho.Answer
		err error
	}
	answers := make(chan answer, len(srcs))
	for i, src := range srcs {
		go func() {
			a, err := f.client.Chat(ctx, src.ID, f.cfg.Honcho.Speaker, honcho.Question{Query: question})
			answers <- answer{i, a, err}
		}()
	}
	res := make([]honcho.Answer, len(srcs))
	errs := make([]error, len(srcs))
	for i := range errs {
		errs[i] = errors.New("no answer within the read bound")
	}
	for n := 0; n < len(srcs); n++ {
		select {
		case a := <-answers:
			res[a.i], errs[a.i] = a.ans, a.err
			continue
		case <-ctx.Done():
		}
		break
	}
	a := Asked{Class: dataclass.Floor, Reach: Reach{Asked: len(srcs)}}
	for i, src := range srcs {
		if errs[i] != nil {
			a.Reach.Failed = append(a.Reach.Failed, src.ID.String())
			f.log.Warn("fleet memory: a workspace's dialectic was not reached; see docs/runbook.md#fleet-memory-unreached", "workspace", src.ID.String(), "err", errs[i].Error())
			continue
		}
		a.Reach.Answered++
		a.Untrusted = a.Untrusted || !src.Trusted
		a.Answers = append(a.Answers, WorkspaceAnswer{Workspace: src.ID.String(), Trusted: src.Trusted, Text: strings.TrimSpace(res[i].Content)})
	}
	return a
}
