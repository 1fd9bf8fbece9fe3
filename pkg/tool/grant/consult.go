package grant

import (
	"errors"
	"fmt"
	"regexp"

	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// A consult grant lets the model ask a remote OpenAI-compatible model one
// question (docs/egress.md, the consult row):
//
//	[[grant]]
//	id = "consult-glm"
//	tool = "consult"
//	hosts = ["api.z.ai"]          # the endpoint's host, as brokerd.toml's [consult] endpoint names it
//	secret = "ZAI_API_KEY"        # the API key, from brokerd's [secrets]
//	model = "glm-5.3-flash"
//	max_taint = "private"         # every session starts private: private is needed for any consult
//	untrusted_sessions = false    # true lets an untrusted session consult
//	memory = "stays"              # stays, identity_may_leave or all_may_leave
//	mode = "ask"                  # the owner sees the full payload before it leaves
//
// Rules: hosts, secret and model are required; max_taint may not be
// secret (secret data never leaves) unless the grant denies; untrusted
// may not be false, because a remote model's answer is text from outside;
// memory is one of its three words, nothing else ([Memory]).

// modelPattern is a model's name: what vendors use ("glm-5.3-flash",
// "org/model:variant"), nothing that could break out of a JSON string.
var modelPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$`)

// Memory is which memory text a consult grant lets leave the owner's
// hosts in a consult's question or context. The zero value is invalid.
// The order is permissiveness: Stays < IdentityMayLeave < AllMayLeave.
//
// Every session's prompt holds the owner's identity files (the baseline:
// memory/soul.md, memory.md, user.md), and brokerd cannot see a prompt, so
// brokerd reads every session as holding identity text: a grant that says
// stays allows no consult at all. A session that has been handed recall or
// ask_memory results also holds recalled memory (notes, past sessions,
// fleet memory), which only AllMayLeave lets out.
type Memory uint8

// The memory words.
const (
	MemoryStays      Memory = iota + 1 // no memory text leaves: every consult is refused
	IdentityMayLeave                   // the identity files may leave; recalled memory may not
	AllMayLeave                        // identity and recalled memory may leave
)

var memoryNames = [...]string{MemoryStays: "stays", IdentityMayLeave: "identity_may_leave", AllMayLeave: "all_may_leave"}

// Valid reports whether m is one of the three words.
func (m Memory) Valid() bool { return m >= MemoryStays && m <= AllMayLeave }

func (m Memory) String() string {
	if !m.Valid() {
		return fmt.Sprintf("invalid memory %d", uint8(m))
	}
	return memoryNames[m]
}

// MarshalText writes the word.
func (m Memory) MarshalText() ([]byte, error) {
	if !m.Valid() {
		return nil, fmt.Errorf("marshal memory: %v", m)
	}
	return []byte(memoryNames[m]), nil
}

// ParseMemory reads a memory word, exactly.
func ParseMemory(s string) (Memory, error) {
	for m := MemoryStays; m <= AllMayLeave; m++ {
		if memoryNames[m] == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("memory %q is not stays, identity_may_leave or all_may_leave", s)
}

// Memory is which memory text a consult grant lets leave (0 for other
// tools).
func (g Grant) Memory() Memory { return g.memory }

// Model is a consult grant's model name ("" for other tools).
func (g Grant) Model() string { return g.model }

// UntrustedSessions reports whether a consult grant applies in a session
// that has read untrusted content (false for other tools).
func (g Grant) UntrustedSessions() bool { return g.untrustedOK }

// parseConsult reads the consult-only keys, refusing them elsewhere.
func (g *Grant) parseConsult(s Spec) error {
	if s.Tool != toolset.Consult {
		if s.Model != "" || s.UntrustedSessions != nil || s.Memory != nil {
			return fmt.Errorf("%s does not take model, untrusted_sessions or memory (only consult does)", s.Tool)
		}
		return nil
	}
	if s.Secret == "" {
		return errors.New("consult needs secret: the name of the API key in brokerd's [secrets]")
	}
	if s.Model == "" {
		return errors.New("consult needs model: the remote model's name")
	}
	if !modelPattern.MatchString(s.Model) {
		return fmt.Errorf("model %q must be 1 to 128 letters, digits or ._:/@+-, starting with a letter or digit", s.Model)
	}
	g.model = s.Model
	g.untrustedOK = s.UntrustedSessions != nil && *s.UntrustedSessions
	g.memory = MemoryStays
	if s.Memory != nil {
		m, err := ParseMemory(*s.Memory)
		if err != nil {
			return err
		}
		g.memory = m
	}
	return nil
}

// checkConsult applies the rules that need the parsed classes.
func (g *Grant) checkConsult(s Spec) error {
	if g.tool != toolset.Consult {
		return nil
	}
	if g.mode != Deny && g.maxTaint == dataclass.Secret {
		return errors.New("a consult grant's max_taint may not be \"secret\": secret data never leaves the owner's hosts")
	}
	if s.Untrusted != nil && !*s.Untrusted {
		return errors.New("a consult grant may not set untrusted = false: a remote model's answer is text from outside")
	}
	return nil
}
