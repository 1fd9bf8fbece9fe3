package fakes

// The mid-turn kill check (checks/vm, TestDeployment's midturn subtests)
// drives the fakes through files in their directory, one set per role:
//
//   - the test writes Go(role): the fakes post MidTurnMessage(role) as the
//     owner, a new root in the direct channel (so a session of its own),
//     and write Root(role), the root post's id;
//   - the fake model answers every request whose body holds the message
//     by the role's script (MidTurnScript in the fakes' test), writing how
//     many it answered to Served(role); a held reply waits, pinging, until
//     the test writes Release(role);
//   - the fakes keep Posts(role) current: the bot's posts in that thread,
//     a JSON array of [Post].
func Go(role string) string      { return "go-" + role }
func Root(role string) string    { return "root-" + role }
func Served(role string) string  { return "served-" + role }
func Release(role string) string { return "release-" + role }
func Posts(role string) string   { return "posts-" + role + ".json" }

// MidTurnMessage is the owner's message of role's check; it names the
// role so that the fake model tells the checks' requests apart.
func MidTurnMessage(role string) string { return "mid-turn check of " + role }

// MidTurnAnswer is what the fake model answers role's check with.
func MidTurnAnswer(role string) string {
	return "Answered across the restart of " + role + "."
}

// HoldAfter is how many tokens a held reply streams before it holds: the
// stream is under way (bytes went through inferproxy) when the role dies.
const HoldAfter = 3

// Post is one bot post as Posts(role) records it: its text and its
// boxmaker_turn prop ("" when it has none).
type Post struct {
	Message string `json:"message"`
	Turn    string `json:"turn"`
}
