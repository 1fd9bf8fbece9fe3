package memoryd

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd/honchoconf"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

// Project is one [[project]] table: a set of Mattermost channels whose
// threads share a memory of their own, apart from every other project's
// (decision row "Projects in memory"). A thread outside every project
// recalls only the agent's own memory; a thread of a project recalls the
// agent's own memory and its project's. The channel comes from gatewayd
// (where the post was heard) through loopd, never from the model.
type Project struct {
	Name     string   `toml:"name"`     // a short name: hits and receipts show it
	Channels []string `toml:"channels"` // Mattermost channel ids, each in one project at most
	// Threads are Mattermost threads (root post ids) of the project in
	// channels of no project or another one (a direct message, a shared
	// channel): a listed thread is the project's whatever its channel.
	Threads []string `toml:"threads"`
	// Trust is how recall labels the project's hits: "untrusted" (the
	// default: memory-tainted, so a session that recalls them is
	// untrusted) or "trusted".
	Trust string `toml:"trust"`
	// TrustedWorkspace and UntrustedWorkspace are the project's Honcho
	// workspace pair (both or neither; decision row "Projects in memory"):
	// its sessions' clean turns go to the first, every other written turn
	// to the second, and its threads' recall and ask_memory read both
	// besides the agent's. Without them a project's turns stay on the
	// host. Shared with the project's other agents, never with another
	// project's.
	TrustedWorkspace   string `toml:"trusted_workspace"`
	UntrustedWorkspace string `toml:"untrusted_workspace"`
	// ReadOnly: this agent reads the project's memory but writes none of
	// it: the memory tool is refused in the project's threads, and their
	// turns are not filed to the project's pair (the session logs stay
	// this agent's own, recalled in the project's threads).
	ReadOnly bool `toml:"read_only"`

	pair *[2]honchoconf.ID
}

// Pair is the project's Honcho workspace pair, if it has one.
func (p Project) Pair() (trusted, untrusted honchoconf.ID, ok bool) {
	if p.pair == nil {
		return honchoconf.ID{}, honchoconf.ID{}, false
	}
	return p.pair[0], p.pair[1], true
}

// Trusted reports whether the project's hits are trusted.
func (p Project) Trusted() bool { return p.Trust == "trusted" }

var (
	projectName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)
	// channelID is a Mattermost id: 26 lower-case base32 characters
	// (model.NewId, mattermost/mattermost server/public/model/utils.go).
	channelID = regexp.MustCompile(`^[a-z0-9]{26}$`)
)

// checkProjects refuses a project without a usable name or channel, a
// name used twice, a channel in two projects (its threads' memory would
// belong to both, and so to neither's wall), and a workspace pair that
// is half given, not Honcho ids, or shared with the agent (fleet, if
// any) or another project. It parses each pair.
func checkProjects(ps []Project, fleet *honchoconf.Settings) error {
	names := map[string]bool{}
	channels, threads := map[string]string{}, map[string]string{}
	workspaces := map[honchoconf.ID]string{}
	if fleet != nil {
		workspaces[fleet.Trusted], workspaces[fleet.Untrusted] = "this agent", "this agent"
		for _, o := range fleet.Others {
			workspaces[o.ID] = "[honcho] workspaces"
		}
	}
	for i := range ps {
		p := &ps[i]
		bad := func(format string, a ...any) error {
			return fmt.Errorf("project[%d]: "+format+"; see docs/runbook.md#memory-project-refused", append([]any{i}, a...)...)
		}
		if !projectName.MatchString(p.Name) {
			return bad("name %q must be 1 to 32 lower-case letters, digits, '-' or '_'", p.Name)
		}
		if names[p.Name] {
			return bad("name %q is used twice", p.Name)
		}
		names[p.Name] = true
		if len(p.Channels) == 0 && len(p.Threads) == 0 {
			return bad("%s has no channels and no threads: no thread could ever be in it", p.Name)
		}
		for _, th := range p.Threads {
			if !channelID.MatchString(th) {
				return bad("%s: %q is not a Mattermost thread id (the root post's id: 26 lower-case letters and digits)", p.Name, th)
			}
			if other, ok := threads[th]; ok {
				return bad("thread %s is in projects %s and %s; a thread belongs to one project", th, other, p.Name)
			}
			threads[th] = p.Name
		}
		for _, ch := range p.Channels {
			if !channelID.MatchString(ch) {
				return bad("%s: %q is not a Mattermost channel id (26 lower-case letters and digits)", p.Name, ch)
			}
			if other, ok := channels[ch]; ok {
				return bad("channel %s is in projects %s and %s; a channel belongs to one project", ch, other, p.Name)
			}
			channels[ch] = p.Name
		}
		switch p.Trust {
		case "", "untrusted", "trusted":
		default:
			return bad("%s: trust is %q, want \"trusted\" or \"untrusted\"", p.Name, p.Trust)
		}
		if (p.TrustedWorkspace == "") != (p.UntrustedWorkspace == "") {
			return bad("%s: give both trusted_workspace and untrusted_workspace, or neither", p.Name)
		}
		if p.TrustedWorkspace == "" {
			continue
		}
		if fleet == nil {
			return bad("%s names Honcho workspaces, but memoryd.toml has no [honcho] table", p.Name)
		}
		var pair [2]honchoconf.ID
		for j, w := range []string{p.TrustedWorkspace, p.UntrustedWorkspace} {
			id, err := honchoconf.ParseID(w)
			if err != nil {
				return bad("%s: workspace %q: %v", p.Name, w, err)
			}
			if other, ok := workspaces[id]; ok {
				return bad("%s: workspace %s is also %s's; a project's pair is its own", p.Name, w, other)
			}
			workspaces[id] = p.Name
			pair[j] = id
		}
		p.pair = &pair
	}
	return nil
}

// ProjectOfSession is the project of session, in channel: the project
// that lists its thread (a gatewayd session, [wire.ChatSessionPrefix]
// and the root post id), else its channel's; ok is false for neither.
func (c Config) ProjectOfSession(session, channel string) (Project, bool) {
	if th, ok := strings.CutPrefix(session, wire.ChatSessionPrefix); ok {
		for _, p := range c.Projects {
			if slices.Contains(p.Threads, th) {
				return p, true
			}
		}
	}
	return c.ProjectOf(channel)
}

// ProjectOf is the project channel belongs to; ok is false for a
// channel of no project (and for "", a session with no channel).
func (c Config) ProjectOf(channel string) (Project, bool) {
	if channel == "" {
		return Project{}, false
	}
	for _, p := range c.Projects {
		for _, ch := range p.Channels {
			if ch == channel {
				return p, true
			}
		}
	}
	return Project{}, false
}

// Project is the project named name.
func (c Config) Project(name string) (Project, bool) {
	for _, p := range c.Projects {
		if p.Name == name {
			return p, true
		}
	}
	return Project{}, false
}
