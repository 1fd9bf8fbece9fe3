package memd

import (
	"errors"
	"fmt"
	"io/fs"

	"wntrmute.dev/boxmaker/cmd/memoryd/internal/fleet"
	"wntrmute.dev/boxmaker/cmd/memoryd/internal/recall"
	"wntrmute.dev/boxmaker/cmd/memoryd/internal/store"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd/honchoconf"
	"wntrmute.dev/boxmaker/pkg/logs/sessionlog"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// Projects (memoryd.toml's [[project]] tables; decision row "Projects in
// memory, built"): a session belongs to the project of its channel, which
// loopd keeps in the session's baseline (from gatewayd's word on where
// the thread is) and names in each identity request. Every document of
// the index carries its session's project ("" for none, the agent's own
// memory); recall in a session searches the agent's own memory and its
// project's, and a session of no project only the agent's own. Nothing
// the model says picks a project.

// noteChannel records session's channel as loopd named it, for the
// session's later tool calls (a restart of memoryd reads it again from
// the baseline).
func (m *Memd) noteChannel(session, channel string) {
	m.chanMu.Lock()
	defer m.chanMu.Unlock()
	if m.channels == nil {
		m.channels = map[string]string{}
	}
	m.channels[session] = channel
}

// channelOf is session's channel: as loopd last named it, else as the
// session's epoch 0 baseline holds it ("" for none, or an unreadable
// baseline, which is logged).
func (m *Memd) channelOf(session string) string {
	if session == "" || session == wire.OwnerSession {
		return ""
	}
	m.chanMu.Lock()
	ch, ok := m.channels[session]
	m.chanMu.Unlock()
	if ok {
		return ch
	}
	b, err := sessionlog.ReadBaseline(layout.EpochBaseline(layout.SessionDir(m.cfg.StateDir, session), 0))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		m.log.Warn("session baseline unreadable: the session is taken to be in no project; see docs/runbook.md#memoryd-unavailable", "session", session, "err", err.Error())
	default:
		ch = b.Channel
	}
	m.noteChannel(session, ch)
	return ch
}

// projectOf is the name of session's project, "" for none.
func (m *Memd) projectOf(session string) string {
	p, ok := m.cfg.ProjectOfSession(session, m.channelOf(session))
	if !ok {
		return ""
	}
	return p.Name
}

// projectDocs labels docs with their sessions' projects.
func (m *Memd) projectDocs(docs []recall.Doc) []recall.Doc {
	for i := range docs {
		docs[i].Project = m.projectOf(docs[i].Session)
	}
	return docs
}

// projectTurns labels the documents of turns with their sessions'
// projects.
func (m *Memd) projectTurns(turns []recall.Turn) []recall.Turn {
	for i := range turns {
		m.projectDocs(turns[i].Docs)
	}
	return turns
}

// trustHits marks the hits of an untrusted project memory-tainted: the
// owner's trust in a project is its config's, not the writing session's.
func (m *Memd) trustHits(hits []recall.Hit) []recall.Hit {
	for i, h := range hits {
		if h.Project == "" {
			continue
		}
		if p, ok := m.cfg.Project(h.Project); !ok || !p.Trusted() {
			hits[i].Source = recall.SourceTainted
		}
	}
	return hits
}

// validChannel reports whether ch is "" or a Mattermost id (26 lower-case
// base32 characters, model.NewId in mattermost/mattermost
// server/public/model/utils.go).
func validChannel(ch string) bool {
	if ch == "" {
		return true
	}
	if len(ch) != 26 {
		return false
	}
	for _, c := range ch {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// place is where fleet memory files session's turns: the agent's pair
// for a session of no project, the project's pair for a project's
// session, and nowhere (false) for a project without one.
func (m *Memd) place(session string) (fleet.Pair, bool) {
	p, in := m.cfg.ProjectOfSession(session, m.channelOf(session))
	if !in {
		s, _ := m.cfg.Fleet()
		return fleet.Pair{Trusted: s.Trusted, Untrusted: s.Untrusted}, true
	}
	t, u, ok := p.Pair()
	return fleet.Pair{Trusted: t, Untrusted: u}, ok && !p.ReadOnly
}

// projectWrite refuses a memory tool call in a project's thread that
// would write outside the project's memory, or any in a read-only
// project: identity (memory.md, user.md) is in every thread's prompt, so
// a project's thread may only note (a note of a project's session is
// the project's). "" lets the call through.
func (m *Memd) projectWrite(session string, raw []byte) string {
	p, in := m.cfg.ProjectOfSession(session, m.channelOf(session))
	if !in {
		return ""
	}
	if p.ReadOnly {
		return fmt.Sprintf("memory: this thread is in project %s, which this agent only reads (read_only in memoryd.toml); nothing was written; see docs/runbook.md#memory-project-write", p.Name)
	}
	if a, err := store.ParseArgs(raw); err == nil && a.Action != "note" {
		return fmt.Sprintf("memory: this thread is in project %s; memory.md and user.md are in every thread's prompt, so a project's thread writes only notes (action note: the project's memory); nothing was written; see docs/runbook.md#memory-project-write", p.Name)
	}
	return ""
}

// projectSources are the Honcho workspaces session's project adds to
// what recall and ask_memory read: its pair, the trusted one trusted only
// when the project is.
func (m *Memd) projectSources(session string) []honchoconf.Source {
	p, in := m.cfg.ProjectOfSession(session, m.channelOf(session))
	if !in {
		return nil
	}
	t, u, ok := p.Pair()
	if !ok {
		return nil
	}
	return []honchoconf.Source{{ID: t, Trusted: p.Trusted()}, {ID: u}}
}
