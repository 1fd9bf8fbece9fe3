package sanitize

import (
	"regexp"
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
// folded to their Latin look-alikes, accents dropped), as a regular
// expression in which a space stands for any run of separators between
// two words and each letter also matches its common digit or symbol
// stand-in ("1gn0r3"). A phrase must start and end on a word boundary;
// inside spaced-out letters it is also looked for with every separator
// removed ("i g n o r e p r e v i o u s ...").
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
	`(new|updated|revised|real|actual|true|override|overriding|secret|hidden|priority|admin|developer) (system )?(instructions?|prompt|directives?|commands)[ ]?:`,
	`system (prompt|instructions?|override|directives?)[ ]?:`,
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
	`(the )?(owner|user|admin|administrator|developer|operator) (has )?(authori[sz]ed|approved|permitted|allowed|granted) (you )?to (ignore|bypass|disable|skip|override|turn off)`,

	// German, French, Spanish.
	`(ignorier(e|en|t)?|vergiss|missachte) (alle |die |deine |ihre |samtliche )*(vorherigen|bisherigen|obigen|vorangegangenen|vorigen|fruheren|alten) (anweisungen|instruktionen|befehle|regeln|vorgaben)`,
	`(ignorier(e|en|t)?|vergiss|missachte) (alle|deine) (anweisungen|instruktionen|befehle|regeln|vorgaben)`,
	`vergiss (alles|alle) (was|bisher|davor|oben|vorher)`,
	`neue (anweisungen|anweisung|instruktionen|aufgabe)[ ]?:`,
	`(ignore[rz]?|oublie[rz]?) (toutes? )?(les |tes |vos )?(instructions|consignes|regles) (precedentes|anterieures|ci-dessus)`,
	`(ignora|ignore|olvida|olvide) (todas )?(las |tus |sus )?(instrucciones|reglas|indicaciones) (anteriores|previas)`,
}

const (
	ignoreVerb = `(ignore|ignoring|disregard|disregarding|forget|forgetting|skip|bypass|override|overlook|neglect|discard|drop|abandon|set aside|pay no attention to|do not follow|don't follow|dont follow|stop following|no longer follow)`
	det        = `((all|any|each|every) (of )?)?((the|your|my|these|those|its|our) )?`
	earlier    = `(previous|prior|above|earlier|preceding|foregoing|former|initial|original|old|existing|current|given|system|default|preset|pre-set)`
	orders     = `(instructions?|prompts?|rules|directions|directives?|guidelines|commands?|orders|programming|constraints|restrictions|policies|guardrails|safeguards)`
	qualifier  = `(full|entire|whole|exact|complete|original|initial|hidden|secret|real)`
)

// stand is the letters' stand-ins that the patterns also accept.
var stand = map[byte]string{'a': "a4@", 'e': "e3", 'i': "il1!|", 'l': "li1|", 'o': "o0", 's': "s5$", 't': "t7"}

// compile turns a phrase source into a pattern: with sep for each space
// and each letter a class of it and its stand-ins.
func compile(src, sep string) string {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '[':
			inClass = true
		case c == ']':
			inClass = false
		case c == ' ' && !inClass:
			b.WriteString(sep)
			continue
		case !inClass && stand[c] != "":
			b.WriteString("[" + regexp.QuoteMeta(stand[c]) + "]")
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// phraseRE matches any phrase on word boundaries in the phrase form; a
// space in a source is a run of one to six separators.
var phraseRE = func() *regexp.Regexp {
	alts := make([]string, len(phraseSources))
	for i, s := range phraseSources {
		alts[i] = `(?:` + compile(s, `[^a-z0-9]+`) + `)`
	}
	return regexp.MustCompile(`\b(?:` + strings.Join(alts, "|") + `)(?:[^a-z0-9]|$)`)
}()

// squashedRE matches any phrase with its separators removed, for the
// letters and digits of spaced-out text.
var squashedRE = func() *regexp.Regexp {
	alts := make([]string, len(phraseSources))
	for i, s := range phraseSources {
		s = strings.NewReplacer(`"?`, ``, `'`, ``, `,?`, ``, `-`, ``, `[ ]?:`, ``).Replace(s)
		alts[i] = `(?:` + compile(s, ``) + `)`
	}
	return regexp.MustCompile(strings.Join(alts, "|"))
}()

// findPhrase reports the first instruction phrase in the phrase form f,
// as a byte range of f.s; runs are where it joined spaced-out letters.
func findPhrase(f form, runs []span) (span, string, bool) {
	if loc := phraseRE.FindStringIndex(f.s); loc != nil {
		return span{loc[0], loc[1]}, f.s[loc[0]:loc[1]], true
	}
	if len(runs) == 0 {
		return span{}, "", false
	}
	sq, at := squash(f)
	for _, loc := range squashedRE.FindAllStringIndex(sq, -1) {
		start, end := at[loc[0]], at[loc[1]-1]+1
		for _, r := range runs {
			if start < r.end && r.start < end {
				return span{start, end}, sq[loc[0]:loc[1]], true
			}
		}
	}
	return span{}, "", false
}
