package memoryd

import (
	"fmt"
	"regexp"
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
	// Trust is how recall labels the project's hits: "untrusted" (the
	// default: memory-tainted, so a session that recalls them is
	// untrusted) or "trusted".
	Trust string `toml:"trust"`
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
// name used twice and a channel in two projects (its threads' memory
// would belong to both, and so to neither's wall).
func checkProjects(ps []Project) error {
	names := map[string]bool{}
	channels := map[string]string{}
	for i, p := range ps {
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
		if len(p.Channels) == 0 {
			return bad("%s has no channels: no thread could ever be in it", p.Name)
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
	}
	return nil
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
