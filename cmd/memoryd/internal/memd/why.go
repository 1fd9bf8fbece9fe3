package memd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"wntrmute.dev/boxmaker/cmd/memoryd/internal/store"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/socket/sockets"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/text/escape"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// why answers `bxctl memory why ID` from memoryd's own files: notes.md,
// the journal, the identity files with edits/, and the session logs. It
// writes nothing. The links only brokerd's audit log holds are bxctl's
// to add (memoryd cannot read broker/audit).
func (m *Memd) why(_ context.Context, _ sockets.Peer, r *wire.MemoryWhy) strict.Variant {
	c, err := m.Why(r.ID)
	var rr *store.Refused
	switch {
	case errors.As(err, &rr):
		return &wire.Error{Op: "why", Kind: wire.Invalid, Msg: rr.Msg}
	case err != nil:
		m.log.Error("why", "id", r.ID, "err", err.Error())
		return &wire.Error{Op: "why", Kind: wire.Internal, Msg: "memoryd could not read its files for the why-chain; see docs/runbook.md#memoryd-unavailable"}
	}
	return c
}

var identityEntry = regexp.MustCompile(`^(soul\.md|memory\.md|user\.md)#([1-9][0-9]{0,3})$`)

var honchoHit = regexp.MustCompile(`^honcho workspace (\S+) session (\S+) peer (\S+)$`)

// Why builds the why-chain of id.
func (m *Memd) Why(id string) (*wire.WhyChain, error) {
	id = strings.TrimSpace(id)
	c := &wire.WhyChain{ID: id, Steps: []string{}}
	add := func(format string, a ...any) { c.Steps = append(c.Steps, fmt.Sprintf(format, a...)) }
	switch {
	case store.NoteID.MatchString(id):
		n, ok := m.store.Note(id)
		if !ok {
			return nil, &store.Refused{Msg: fmt.Sprintf("why: there is no note %s in notes.md; see docs/runbook.md#memory-why-refused", id)}
		}
		c.Session, c.At = n.Session, n.At
		what := fmt.Sprintf("note %s: kind %s, source %s, class %s", n.ID, n.Kind, n.Source(), n.Class)
		if n.File != "" {
			what += ", for or from " + n.File
		}
		add("%s: %s", what, quote(n.Text))
		if err := m.journalOf(c, add, func(e wire.MemoryEdit) bool { return e.File == store.Notes && e.Note == id }); err != nil {
			return nil, err
		}
		if n.Session == wire.OwnerSession {
			add("written by the owner (bxctl), not by a session")
		} else {
			re := regexp.MustCompile(`\b` + regexp.QuoteMeta(id) + `\b`)
			if err := m.sessionOf(c, add, n.Session, func(r *sessionlog.ToolResult) bool {
				return r.Tool == toolset.Memory && re.MatchString(r.Content)
			}); err != nil {
				return nil, err
			}
			if n.Untrusted {
				add("memoryd recorded the note untrusted: brokerd's label for the session when it decided the memory call")
			}
		}
	case identityEntry.MatchString(id):
		if err := m.whyEntry(c, add, id); err != nil {
			return nil, err
		}
	case honchoHit.MatchString(id):
		m.whyHoncho(add, honchoHit.FindStringSubmatch(id))
	default:
		s, e, t, rec, ok := store.ParseRecordKey(id)
		if !ok {
			return nil, &store.Refused{Msg: fmt.Sprintf("why: %q is not a note id (n12), a session record as recall shows it (session s1 epoch 0 turn 2 record 5), an identity entry (memory.md#2) or a Honcho hit (honcho workspace W session S peer P); see docs/runbook.md#memory-why-refused", id)}
		}
		c.Session = s
		add("a record of session %s's log, %s line %d (epoch %d, turn %d)", s, layout.EpochRel(s, e), rec, e, t)
		if err := m.sessionOf(c, add, s, func(*sessionlog.ToolResult) bool { return false }, e, int64(rec)); err != nil {
			return nil, err
		}
	}
	if tomb, ok := m.store.Forgotten()[id]; ok {
		add("forgotten: tombstone %s in notes.md; recall no longer returns it (bxctl memory forget --undo %s takes it back)", tomb, id)
	}
	return c, nil
}

// journalOf adds the journal record the match selects.
func (m *Memd) journalOf(c *wire.WhyChain, add func(string, ...any), match func(wire.MemoryEdit) bool) error {
	edits, err := store.ReadJournal(filepath.Join(m.store.Dir(), "edits", store.JournalName))
	if err != nil {
		return err
	}
	for _, e := range edits {
		if match(e) {
			add("journal record %d at %s: session %s, %s %s", e.Seq, e.At, e.Session, e.File, e.Action)
			return nil
		}
	}
	add("no journal record names it (a note older than the journal, or a hand edit)")
	return nil
}

// sessionOf adds where in session s the entry was written and the
// session's trust there: the tool result the match selects, or the
// record at (epoch, line) when at is given; and the first untrusted tool
// result before it, the one that made the session untrusted.
func (m *Memd) sessionOf(c *wire.WhyChain, add func(string, ...any), s string, match func(*sessionlog.ToolResult) bool, at ...int64) error {
	files, err := sessionlog.Files(layout.Sessions.In(m.cfg.StateDir))
	if err != nil {
		return err
	}
	var first *sessionlog.ToolResult
	var firstEpoch int64
	var firstLine int
	found := false
	for _, f := range files {
		fs, epoch, err := sessionlog.Name(f)
		if err != nil || fs != s || found {
			continue
		}
		err = sessionlog.Scan(f, func(line int, r sessionlog.Record, t sessionlog.Trust) error {
			if found {
				return nil
			}
			tr, isResult := r.(*sessionlog.ToolResult)
			if isResult && tr.Untrusted && first == nil {
				first, firstEpoch, firstLine = tr, epoch, line
			}
			hit := isResult && match(tr)
			if len(at) == 2 && epoch == at[0] && int64(line) == at[1] {
				hit = true
				add("the record is a %s in turn %d", r.Tag(), r.TurnOf())
			}
			if !hit {
				return nil
			}
			found = true
			if isResult && len(at) == 0 {
				if !tr.Truncated {
					sum := sha256.Sum256([]byte(tr.Content))
					c.Output = hex.EncodeToString(sum[:])
				}
				add("written by the memory tool call %s in session %s epoch %d turn %d (%s line %d)", escape.Line(tr.CallID), s, epoch, tr.Turn, layout.EpochRel(s, epoch), line)
			}
			trust := "trusted"
			if t.Untrusted {
				trust = "untrusted"
			}
			add("session %s was %s there, taint %s (as its log labels it)", s, trust, t.Taint)
			return nil
		})
		if err != nil {
			return err
		}
	}
	if !found {
		add("session %s's log does not show where (sessions/%s/ is missing or was cut)", s, s)
	}
	if first != nil {
		add("session %s became untrusted at epoch %d turn %d: the %s result of call %s (%s line %d, class %s)", s, firstEpoch, first.Turn, first.Tool, escape.Line(first.CallID), layout.EpochRel(s, firstEpoch), firstLine, first.Class)
	} else if found {
		add("session %s had read no untrusted tool result before it", s)
	}
	return nil
}

// whyEntry traces an identity file's entry to the journalled edit that
// put its text there: the journal keeps each edit's previous content in
// edits/<seq>.before, so the content after an edit is the next edit's
// before (or the file now).
func (m *Memd) whyEntry(c *wire.WhyChain, add func(string, ...any), id string) error {
	p := identityEntry.FindStringSubmatch(id)
	file := p[1]
	i, _ := strconv.Atoi(p[2])
	cur, err := os.ReadFile(filepath.Join(m.store.Dir(), file))
	if err != nil {
		return err
	}
	entries := store.Entries(string(cur))
	if i > len(entries) {
		return &store.Refused{Msg: fmt.Sprintf("why: %s has %d entries; see docs/runbook.md#memory-why-refused", file, len(entries))}
	}
	text := entries[i-1]
	add("entry %d of %s: %s", i, file, quote(text))
	if file == store.Soul {
		add("soul.md is written only by the owner, by hand; memoryd journals no edit of it")
		return nil
	}
	edits, err := store.ReadJournal(filepath.Join(m.store.Dir(), "edits", store.JournalName))
	if err != nil {
		return err
	}
	var mine []wire.MemoryEdit
	for _, e := range edits {
		if e.File == file && e.Action != store.ActionVoid {
			mine = append(mine, e)
		}
	}
	has := func(content string) bool {
		for _, e := range store.Entries(content) {
			if e == text {
				return true
			}
		}
		return false
	}
	for k, e := range mine {
		before, err := os.ReadFile(filepath.Join(m.store.Dir(), "edits", fmt.Sprintf("%d.before", e.Seq)))
		if err != nil {
			continue
		}
		after := string(cur)
		if k+1 < len(mine) {
			b, err := os.ReadFile(filepath.Join(m.store.Dir(), "edits", fmt.Sprintf("%d.before", mine[k+1].Seq)))
			if err != nil {
				continue
			}
			after = string(b)
		}
		if has(string(before)) || !has(after) {
			continue
		}
		c.Session, c.At = e.Session, e.At
		add("journal record %d at %s: session %s, %s %s", e.Seq, e.At, e.Session, file, e.Action)
		if e.Session == wire.OwnerSession {
			add("written by the owner (bxctl memory review promote, or an undo)")
			return nil
		}
		re := regexp.MustCompile(`\(edit ` + strconv.FormatInt(e.Seq, 10) + `,`)
		return m.sessionOf(c, add, e.Session, func(r *sessionlog.ToolResult) bool {
			return r.Tool == toolset.Memory && re.MatchString(r.Content)
		})
	}
	add("no journalled edit put this text there: it was written by hand (identity files are the owner's to edit)")
	return nil
}

// whyHoncho explains a fleet memory hit: the workspace and the owner's
// trust in it, and what Honcho does not keep.
func (m *Memd) whyHoncho(add func(string, ...any), p []string) {
	ws, sess, peer := p[1], p[2], p[3]
	trust := "not a workspace memoryd.toml names"
	if s, ok := m.cfg.Fleet(); ok {
		switch ws {
		case s.Trusted.String():
			trust = "this agent's trusted workspace: turns of sessions brokerd's gate called clean"
		case s.Untrusted.String():
			trust = "this agent's untrusted workspace: its hits are memory-tainted"
		default:
			for _, p := range m.cfg.Projects {
				t, u, ok := p.Pair()
				switch {
				case ok && ws == t.String() && p.Trusted():
					trust = "project " + p.Name + "'s trusted workspace (the project is trusted): turns of its sessions brokerd's gate called clean"
				case ok && ws == t.String():
					trust = "project " + p.Name + "'s trusted workspace, read as untrusted (the project is untrusted)"
				case ok && ws == u.String():
					trust = "project " + p.Name + "'s untrusted workspace: its hits are memory-tainted"
				}
			}
			for _, o := range s.Others {
				if o.ID.String() == ws {
					trust = "another agent's workspace, read as untrusted"
					if o.Trusted {
						trust = "another agent's workspace, read as trusted (memoryd.toml)"
					}
				}
			}
		}
	}
	add("a fleet memory hit from Honcho workspace %s (%s), Honcho session %s, peer %s", ws, trust, sess, peer)
	add("Honcho keeps no per-entry provenance: it does not record which tool results or which session state led to a message or a conclusion; what is known is the workspace and the trust memoryd.toml gives it")
	if wire.CheckSessionID(sess) == nil {
		if _, err := os.Stat(layout.SessionDir(m.cfg.StateDir, sess)); err == nil {
			add("Honcho session %s names a session of this Boxmaker: its log is sessions/%s/ (bxctl memory why \"session %s epoch E turn T record R\" for a record of it)", sess, sess, sess)
		}
	}
}

func quote(s string) string { return strconv.Quote(escape.Line(s)) }
