package sanitize

import (
	"regexp"
	"sort"
	"strings"
)

// The instruction phrases, from the public prompt-injection corpora and
// probes docs/sanitize.md cites: overriding earlier instructions, a new
// role or mode, new or fake system instructions, asking for the prompt,
// secrecy towards the user, and the hijacking forms of garak's
// promptinject probe; a few in German, French and Spanish, the other
// languages of deepset/prompt-injections and the multilingual sets.
//
// Each is written in the phrase form ([phraseForm]: lower case, letters
// folded to their Latin look-alikes, accents dropped, digit and symbol
// stand-ins in words read as letters, "1gn0r3" as "ignore"), as a regular
// expression that starts with a word or a group of words, in which a
// space stands for any run of separators between two words. A phrase
// must start and end on a word boundary; inside spaced-out letters it is
// also looked for with every separator removed ("i g n o r e p r e v i o
// u s ...").
var phraseSources = []string{
	// Override earlier instructions.
	ignoreVerb + ` ` + det + `(` + earlier + ` )(and (following|subsequent|future|later) )?` + orders,
	ignoreVerb + ` (all (of )?)?(your|my) (own )?(` + orders + `|training|programming|system prompt)`,
	ignoreVerb + ` (everything|anything|all( of)?( the)?( text| words)?) (above|before this|prior to this|so far|you (were|have been|'ve been) (told|given|instructed))`,
	ignoreVerb + ` (what|everything|anything) you (were|have been|'ve been) (told|instructed|programmed|trained)`,
	ignoreVerb + ` (the |all |everything )?(above|previous|prior|preceding|earlier)( (text|directions|instructions|prompt))? and (instead|just|only|say|print|write|output|respond|reply|answer|tell)`,
	ignoreVerb + ` (your |the |all |any )*(safety|security|ethical|ethics|content|moderation) (guidelines|filters|policies|policy|restrictions|protocols|guardrails|safeguards)`,
	`(stop|halt) everything (now )?(just )?(say|print|write|output|repeat)`,

	// A new role, a new mode.
	`you are now (a|an|the|in|my|no longer|free|unrestricted|unfiltered|uncensored|jailbroken|dan|evil|root|admin|administrator|god)`,
	`you are no longer (a|an|bound|restricted|limited|an ai|an assistant|boxmaker|subject to)`,
	`(from now on|from this (point|moment) (on|onwards?|forward)|starting (now|today)|henceforth|hereafter|for the rest of (this|the) (conversation|session|chat)),? (you|u) (are|will|must|shall|act|respond|answer|reply|obey|follow|only|always|never|ignore|no longer)`,
	`(you will|you must|you shall) now (act|be|behave|respond|answer|reply|obey|follow|ignore|pretend)`,
	`(enable|enter|activate|switch to|turn on|engage) (dan|jailbreak|jailbroken|unrestricted|unfiltered|uncensored|god) mode`,
	`(dan|jailbreak|jailbroken) mode (enabled|activated|on|engaged)`,
	`you are (now )?(in )?(dan|jailbreak|developer|unrestricted|god) mode`,
	`do anything now`,
	`(act|behave|respond|answer|reply) as (if )?(you (are|were) )?(an? )?(unrestricted|unfiltered|uncensored|jailbroken|evil|rogue|dan)`,
	`pretend (to be|you are|that you are) (an? )?(unrestricted|unfiltered|uncensored|jailbroken|evil|dan|different ai|ai without)`,
	`you (have|has) no (restrictions|rules|filters|guidelines|limits|limitations|boundaries)`,
	`your (new|real|true|actual|only) (role|purpose|task|job|goal|objective|mission|name|identity|instructions) (is|are|will be|now)`,
	`(i am|i'm|this is) your (new )?(developer|creator|administrator|admin|operator|programmer|maker|owner|master)`,

	// New or fake system instructions, fake delimiters.
	`(new|updated|revised|real|actual|true|override|overriding|secret|hidden|priority|admin|developer) (system )?(instructions?|prompt|directives?|commands)\s?:`,
	`system (prompt|instructions?|override|directives?)\s?:`,
	`(system|admin|administrator|developer|security) override`,
	`(end|begin|start) (of )?(the )?(system|user) (prompt|input|instructions?|message)`,
	`(begin|start) (new )?(system )?instructions`,
	`end (user )?ambiguity`,
	`(these|this) (is|are) (the|your) (real|true|actual|only|new) (instructions|prompt|orders|task)`,

	// Asking for the prompt or a secret.
	`(reveal|leak|dump|disclose|exfiltrate) (to me |me )?(your|the) (` + qualifier + ` )*(system |developer )?(prompt|instructions)`,
	`(print|repeat|output|show|display|tell|give|write out|spell out|recite|paste|copy|type out|say|share|send) (me |us )?(back )?your (` + qualifier + ` )*(system |developer )?(prompt|instructions|rules|guidelines)`,
	`(repeat|print|output|recite|reproduce) (back )?(all |all of |everything |the )*(text |words |content |lines |instructions )?(above|before this|preceding this|prior to this)`,
	`what (are|were|is|was) your (` + qualifier + ` )?(system )?(instructions|prompt|rules|guidelines)`,
	`(reveal|spell out|leak|disclose) (me )?(the|your|any) (secret |hidden |admin )*(passwords?|passphrases?|api keys?|secrets?|credentials)`,
	`(say|print|output|respond with|reply with|answer with|write) "?access granted`,

	// Secrecy towards the user, a claimed authorisation.
	`(do not|don't|dont|never) (tell|inform|alert|notify|warn) the (user|human)`,
	`without (telling|informing|notifying|alerting|asking) the (user|human)`,
	`(owner|user|admin|administrator|developer|operator) (has )?(authori[sz]ed|approved|permitted|allowed|granted) (you )?to (ignore|bypass|disable|skip|override|turn off)`,

	// German, French, Spanish.
	`(ignoriere|ignorieren|ignoriert|ignorier|vergiss|missachte) (alle |die |deine |ihre |samtliche )*(vorherigen|bisherigen|obigen|vorangegangenen|vorigen|fruheren|alten) (anweisungen|instruktionen|befehle|regeln|vorgaben)`,
	`(ignoriere|ignorieren|ignoriert|ignorier|vergiss|missachte) (alle|deine) (anweisungen|instruktionen|befehle|regeln|vorgaben)`,
	`vergiss (alles|alle) (was|bisher|davor|oben|vorher)`,
	`neue (anweisungen|anweisung|instruktionen|aufgabe)\s?:`,
	`(ignore|ignorer|ignorez|oublie|oublier|oubliez) (toutes? )?(les |tes |vos )?(instructions|consignes|regles) (precedentes|anterieures|ci-dessus)`,
	`(ignora|ignore|olvida|olvide) (todas )?(las |tus |sus )?(instrucciones|reglas|indicaciones) (anteriores|previas)`,
}

const (
	ignoreVerb = `(ignore|ignoring|disregard|disregarding|forget|forgetting|skip|bypass|override|overlook|neglect|discard|drop|abandon|set aside|pay no attention to|do not follow|don't follow|dont follow|stop following|no longer follow)`
	det        = `((all|any|each|every) (of )?)?((the|your|my|these|those|its|our) )?`
	earlier    = `(previous|prior|above|earlier|preceding|foregoing|former|initial|original|old|existing|current|given|system|default|preset|pre-set)`
	orders     = `(instructions?|prompts?|rules|directions|directives?|guidelines|commands?|orders|programming|constraints|restrictions|policies|guardrails|safeguards)`
	qualifier  = `(full|entire|whole|exact|complete|original|initial|hidden|secret|real)`
)

// stand is the digits and symbols read as letters inside a word that
// has a letter ("pr3v10u5", "in$truction$"): leet, the stand-ins
// jailbreak prompts use to dodge word lists.
var stand = [256]byte{'0': 'o', '1': 'i', '3': 'e', '4': 'a', '5': 's', '7': 't', '@': 'a', '$': 's'}

// unleet reads stand-ins in words as letters; it keeps every byte's
// place, so the form's offsets stay valid.
func unleet(s string) string {
	b := []byte(s)
	word := func(c byte) bool { return 'a' <= c && c <= 'z' || stand[c] != 0 || '0' <= c && c <= '9' }
	for i := 0; i < len(b); {
		j, letter := i, false
		for j < len(b) && word(b[j]) {
			letter = letter || 'a' <= b[j] && b[j] <= 'z'
			j++
		}
		if letter {
			for k := i; k < j; k++ {
				if stand[b[k]] != 0 {
					b[k] = stand[b[k]]
				}
			}
		}
		if j == i {
			j++
		}
		i = j
	}
	return string(b)
}

// A phrase is compiled twice, each anchored at the start of its input:
// for the phrase form read by [unleet] (a space in the source is a run of
// separators, and the phrase must end on a word boundary), and for the
// letters and digits alone of spaced-out text.
type phrase struct {
	words, squashed *regexp.Regexp
}

// byTrigger lists the phrases by the words they can start with: a phrase
// is tried only where one of its words starts a word of the text, which
// keeps the check linear and fast.
var byTrigger = func() map[string][]*phrase {
	t := map[string][]*phrase{}
	for _, s := range phraseSources {
		p := &phrase{
			words:    regexp.MustCompile(`^(?:` + strings.ReplaceAll(s, " ", `[^a-z0-9]+`) + `)(?:[^a-z0-9]|$)`),
			squashed: regexp.MustCompile(`^(?:` + strings.NewReplacer(`"?`, ``, `'`, ``, `,?`, ``, `-`, ``, `\s?:`, ``, ` `, ``).Replace(s) + `)`),
		}
		for _, w := range firstWords(s) {
			t[w] = append(t[w], p)
		}
	}
	return t
}()

// firstWords returns the words a source can start with: its first word,
// or the first word of each alternative of its leading group.
func firstWords(s string) []string {
	lead := func(s string) string {
		n := 0
		for n < len(s) && 'a' <= s[n] && s[n] <= 'z' {
			n++
		}
		return s[:n]
	}
	if s == "" || s[0] != '(' {
		w := lead(s)
		if w == "" || len(w) < len(s) && strings.ContainsRune("([?*+{", rune(s[len(w)])) {
			panic("sanitize: a phrase source must start with a whole word: " + s)
		}
		return []string{w}
	}
	depth, start := 0, 1
	var out []string
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return append(out, firstWords(s[start:i])...)
			}
		case '|':
			if depth == 1 {
				out = append(out, firstWords(s[start:i])...)
				start = i + 1
			}
		}
	}
	panic("sanitize: unbalanced phrase source " + s)
}

// window bounds the text phraseRE reads from a trigger: longer than any
// phrase.
const window = 400

// findPhrase reports the first instruction phrase in the phrase form f,
// as a byte range of f.s; runs are where it joined spaced-out letters.
func findPhrase(f form, runs []span) (span, string, bool) {
	s := unleet(f.s)
	for i := 0; i < len(s); {
		if !isLetter(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isLetter(s[j]) {
			j++
		}
		if i == 0 || !isWord(s[i-1]) {
			end := min(len(s), i+window)
			for _, p := range byTrigger[s[i:j]] {
				if loc := p.words.FindStringIndex(s[i:end]); loc != nil && (end == len(s) || loc[1] < end-i) {
					return span{i, i + loc[1]}, s[i : i+loc[1]], true
				}
			}
		}
		i = j
	}
	if len(runs) == 0 {
		return span{}, "", false
	}
	// Spaced-out text: the phrases are looked for in its letters alone,
	// from each place a trigger of three letters or more starts, near a
	// run (a phrase that overlaps a run starts at most a window before it).
	sq, at := squash(form{s: s, off: f.off})
	next := 0 // the first squashed byte not yet tried
	for _, r := range runs {
		lo := max(next, sort.Search(len(sq), func(k int) bool { return at[k] >= r.start-window }))
		hi := sort.Search(len(sq), func(k int) bool { return at[k] >= r.end })
		next = max(next, hi)
		for k := lo; k+3 <= hi; k++ {
			if !triggerPrefix[sq[k:k+3]] {
				continue
			}
			for w := 3; w <= maxTrigger && k+w <= len(sq); w++ {
				for _, p := range byTrigger[sq[k:k+w]] {
					loc := p.squashed.FindStringIndex(sq[k:min(len(sq), k+window)])
					if loc == nil {
						continue
					}
					// A match that ends before a later run may still overlap it.
					start, end := at[k], at[k+loc[1]-1]+1
					for _, r2 := range runs {
						if start < r2.end && r2.start < end {
							return span{start, end}, sq[k : k+loc[1]], true
						}
					}
				}
			}
		}
	}
	return span{}, "", false
}

// triggerPrefix holds the first three letters of each trigger of three
// letters or more, to skip most places of spaced-out text at once.
var triggerPrefix = func() map[string]bool {
	m := map[string]bool{}
	for w := range byTrigger {
		if len(w) >= 3 {
			m[w[:3]] = true
		}
	}
	return m
}()

// maxTrigger is the longest trigger word.
var maxTrigger = func() int {
	n := 0
	for w := range byTrigger {
		n = max(n, len(w))
	}
	return n
}()

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' }

func isWord(c byte) bool { return isLetter(c) || '0' <= c && c <= '9' || c == '_' || c >= 0x80 }
