package gateway

import (
	"strings"
	"unicode"

	"wntrmute.dev/boxmaker/cmd/gatewayd/internal/mattermost"
)

// Who is heard (the decision rows of 2026-09-23 and 2026-09-24):
//   - identity is the Mattermost user id, and only allowlisted ids are
//     heard; a bot is heard only if listed (props.from_bot can be set
//     by any client, so it proves nothing);
//   - Boxmaker's own posts, and every post whose type is not empty
//     (system messages, plugin posts), are ignored;
//   - a post made by an integration is ignored: its user_id is the
//     integration's creator (an incoming webhook's, an OAuth app's, a
//     plugin's bot), not a person who typed it, so props from_webhook,
//     from_plugin or from_oauth_app set to "true", or override_username
//     or override_icon_url present, mean "not heard" whoever the
//     user_id is (model/post.go PostPropsFromWebhook and the others);
//   - direct messages are heard; an open, private or group channel only
//     if allowlisted by id, and there only a post that names this bot,
//     or a reply in one of this Boxmaker's threads that names no other
//     user (@channel, @here and @all name nobody);
//   - a leading mention of this bot is stripped before anything else
//     sees the message.
//
// Mentions are read from the message, never from the event's mentions
// list, which the server also fills for @channel.

// hearer holds the rules.
type hearer struct {
	me       string          // the bot's user id
	name     string          // the bot's username, lower case
	users    map[string]bool // allow.users
	channels map[string]bool // allow.channels
}

// names lists the users a message names, lower case, read as the
// server's mention parser reads them (server/channels/app/
// mention_parser_standard.go, StandardMentionParser.ProcessText):
//   - words are split on every rune that is not a letter, a number,
//     ':', '.', '-', '_' or '@'; a ":word:" is an emoji, not a mention;
//   - leading ":.-_" are trimmed; a word that then starts with '@' names
//     the user whose name it is with trailing ".-:_" trimmed (the parser
//     tries each shorter suffix);
//   - any other word containing '.', '-' or ':' is split again on those
//     three, and each piece starting with '@' names a user: ".@otherbot"
//     and "x-@otherbot" mention otherbot; "x@otherbot" (an e-mail
//     address) does not.
//
// Reading a name that is not one errs towards "names another user",
// the safe side.
func names(msg string) []string {
	var out []string
	add := func(name string) {
		if name != "" {
			out = append(out, strings.ToLower(name))
		}
	}
	for _, word := range strings.FieldsFunc(msg, func(c rune) bool {
		return !(c == ':' || c == '.' || c == '-' || c == '_' || c == '@' || unicode.IsLetter(c) || unicode.IsNumber(c))
	}) {
		if word[0] == ':' && word[len(word)-1] == ':' {
			continue
		}
		word = strings.TrimLeft(word, ":.-_")
		if rest, ok := strings.CutPrefix(word, "@"); ok {
			add(strings.TrimRight(rest, ".-:_"))
			continue
		}
		if strings.ContainsAny(word, ".-:") {
			for _, piece := range strings.FieldsFunc(word, func(c rune) bool { return c == '.' || c == '-' || c == ':' }) {
				if rest, ok := strings.CutPrefix(piece, "@"); ok {
					add(rest)
				}
			}
		}
	}
	return out
}

func isNameByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '.' || b == '-' || b == '_'
}

// verdict is why a post is or is not heard.
type verdict string

const (
	heardOK       verdict = ""
	ignoredOwn    verdict = "own post"
	ignoredType   verdict = "post type is set"
	ignoredUser   verdict = "author not in allow.users"
	ignoredChan   verdict = "channel not in allow.channels"
	ignoredNamed  verdict = "does not name this bot"
	ignoredOther  verdict = "names another user"
	ignoredGone   verdict = "deleted"
	ignoredChType verdict = "unknown channel type"
	ignoredHook   verdict = "posted by an integration (webhook, plugin or OAuth app)"
)

// integration reports whether props mark a post made by an integration
// (see the rules above). Any value of an override_* prop counts; the
// from_* props count as "true" only, as the server reads them.
func integration(props map[string]any) bool {
	for _, k := range []string{"from_webhook", "from_plugin", "from_oauth_app"} {
		if v, ok := props[k].(string); ok && v == "true" {
			return true
		}
	}
	for _, k := range []string{"override_username", "override_icon_url"} {
		if _, ok := props[k]; ok {
			return true
		}
	}
	return false
}

// hear decides whether p is for this Boxmaker; if so it returns the text
// with a leading mention of the bot stripped. ownThread reports whether
// a thread root is one of this Boxmaker's threads.
func (h *hearer) hear(p *mattermost.Posted, ownThread func(root string) bool) (string, verdict) {
	post := p.Post
	switch {
	case post.UserID == h.me:
		return "", ignoredOwn
	case post.Type != "":
		return "", ignoredType
	case post.DeleteAt != 0:
		return "", ignoredGone
	case integration(post.Props):
		return "", ignoredHook
	case !h.users[post.UserID]:
		return "", ignoredUser
	}
	switch p.ChannelType {
	case mattermost.ChannelDirect:
	case mattermost.ChannelOpen, mattermost.ChannelPrivate, mattermost.ChannelGroup:
		if !h.channels[post.ChannelID] {
			return "", ignoredChan
		}
		namesMe, namesOther := false, false
		for _, n := range names(post.Message) {
			switch n {
			case h.name:
				namesMe = true
			case "channel", "here", "all":
			default:
				namesOther = true
			}
		}
		if !namesMe {
			if post.RootID == "" || !ownThread(post.RootID) {
				return "", ignoredNamed
			}
			if namesOther {
				return "", ignoredOther
			}
		}
	default:
		return "", ignoredChType
	}
	return h.strip(post.Message), heardOK
}

// strip removes a leading @botname (and the separator after it).
func (h *hearer) strip(msg string) string {
	t := strings.TrimLeft(msg, " \t\r\n")
	if len(t) < len(h.name)+1 || t[0] != '@' || !strings.EqualFold(t[1:1+len(h.name)], h.name) {
		return msg
	}
	rest := t[1+len(h.name):]
	if rest != "" && isNameByte(rest[0]) && rest[0] != '.' && rest[0] != '-' && rest[0] != '_' {
		return msg // @botname2 is someone else
	}
	if rest != "" && isNameByte(rest[0]) {
		// @botname. or @botname- : trimmed punctuation, as names() reads it
		rest = strings.TrimLeft(rest, ".-_")
		if rest != "" && isNameByte(rest[0]) {
			return msg
		}
	}
	rest = strings.TrimLeft(rest, ",:;")
	return strings.TrimLeft(rest, " \t\r\n")
}
