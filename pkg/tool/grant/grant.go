// Package grant reads the owner's grant files. brokerd loads its grants
// with [LoadDir] and `bxctl grants check DIR` validates a directory with
// the same function, so a directory the check accepts is exactly one
// brokerd accepts.
//
// # Invariants
//
//   - A [Grant] can only be made by [New] (or by parsing a file, which
//     calls it), and holds no invalid state: a known tool, the one kind of
//     constraint that tool takes, clean absolute paths other than "/"
//     with no ':' or ',', host names under package hostrule's rules, a
//     valid mode and classes, and a deny grant's max_taint is secret.
//   - Loading fails closed: one problem anywhere in the directory (a
//     file that does not parse, an unknown key, a bad value, a duplicate
//     id across files, an unexpected file) makes the whole set invalid.
//     [LoadDir] then returns no [Set] and every problem it found, each
//     naming the file, the grant and the reason; brokerd denies every
//     call (grants_invalid) until the owner fixes them. A skipped,
//     mistyped deny grant must never silently become an allow.
//   - A grant's identity in the audit log is [Grant.SHA256]: the SHA-256
//     of its canonical form ([Grant.Canonical]), so it changes when, and
//     only when, what the grant allows changes (not with comments,
//     formatting, key order or the file it is in).
//
// # File format
//
// A grant file is TOML named *.toml in the grant directory, holding one or
// more [[grant]] tables and nothing else:
//
//	[[grant]]
//	id = "notes-read"                 # unique across the directory
//	tool = "read_file"                # read_file, write_file, shell, http_fetch, consult, read_attachment, post_file, mcp.SERVER.TOOL (mcp.go)
//	paths = ["/home/owner/notes"]     # read_file, write_file, shell, read_attachment, post_file, mcp.*
//	# hosts = ["example.com"]         # http_fetch, consult, mcp.*
//	# writable = true                 # shell (its workdir) and mcp.* (its paths): mount read-write
//	# secret = "GITHUB_TOKEN"         # shell and consult: the one secret its container gets
//	# model = "glm-5.3-flash"         # consult only: the remote model's name
//	# untrusted_sessions = false      # consult only: may run in an untrusted session (default false)
//	# memory = "stays"                # consult only: stays, identity_may_leave or all_may_leave (default stays)
//	max_taint = "private"             # highest session taint it applies under
//	result_class = "private"          # class of results (default private)
//	untrusted = false                 # results are untrusted (default true)
//	expires = "2027-01-01T00:00:00Z"  # optional, RFC 3339; expired grants never match
//	mode = "auto"                     # auto, ask or deny
//	# standing = true                 # one exact file or host, auto over an ask (standing.go)
//
// Which tool takes which constraint is fixed here ([ConstraintOf]), not
// chosen per grant. A consult grant (consult.go) names the endpoint's
// host under hosts, the API key's secret, the model and max_taint; it may
// never carry secret data out, its answers are always untrusted, and it
// lets memory text out only if its memory key says which ([Memory]). The
// memory tools (recall, ask_memory, memory) have a
// policy built into brokerd and no grant may name them; patterns are
// refused. A secret is named, never held: brokerd's config says where the
// value of each name lives. See deploy/grants/README.md.
package grant

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
	"wntrmute.dev/boxmaker/pkg/tool/hostrule"
	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// Mode is what a grant does with a call it matches. The zero value is
// invalid. The order is restrictiveness: Deny < Ask < Auto, so among
// matching grants the least Mode wins.
type Mode uint8

// The modes.
const (
	Deny Mode = iota + 1
	Ask
	Auto
)

var modeNames = [...]string{Deny: "deny", Ask: "ask", Auto: "auto"}

// Valid reports whether m is one of the three modes.
func (m Mode) Valid() bool { return m >= Deny && m <= Auto }

func (m Mode) String() string {
	if !m.Valid() {
		return fmt.Sprintf("invalid mode %d", uint8(m))
	}
	return modeNames[m]
}

// MarshalText writes the mode's name.
func (m Mode) MarshalText() ([]byte, error) {
	if !m.Valid() {
		return nil, fmt.Errorf("marshal mode: %v", m)
	}
	return []byte(modeNames[m]), nil
}

// ParseMode reads a mode by its lowercase name.
func ParseMode(s string) (Mode, error) {
	for m := Deny; m <= Auto; m++ {
		if modeNames[m] == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("mode %q is not auto, ask or deny", s)
}

// Constraint is the kind of argument constraint a tool's grants carry.
type Constraint uint8

// The constraints.
const (
	Paths Constraint = iota + 1 // paths: the file, or for shell the working directory, must lie under one
	Hosts                       // hosts: the URL's host must be one of them, exactly
)

// ConstraintOf is the fixed rule of which constraint each tool takes:
// read_file, write_file, shell, read_attachment (the attachments
// directory, or one session's under it) and post_file (what may be
// posted) take paths (for shell, its working
// mounts); http_fetch takes hosts. It is false for any other name.
func ConstraintOf(tool string) (Constraint, bool) {
	switch tool {
	case toolset.ReadFile, toolset.WriteFile, toolset.Shell, toolset.ReadAttachment, toolset.PostFile:
		return Paths, true
	case toolset.HTTPFetch, toolset.Consult:
		return Hosts, true
	}
	return 0, false
}

// Spec is a grant as written in a file, before it is parsed. Empty strings
// and nil slices and pointers are absent keys.
type Spec struct {
	ID          string   `toml:"id"`
	Tool        string   `toml:"tool"`
	Paths       []string `toml:"paths"`
	Hosts       []string `toml:"hosts"`
	Writable    *bool    `toml:"writable"`
	Secret      string   `toml:"secret"`
	MaxTaint    string   `toml:"max_taint"`
	ResultClass string   `toml:"result_class"`
	Untrusted   *bool    `toml:"untrusted"`
	Expires     string   `toml:"expires"`
	Mode        string   `toml:"mode"`
	// consult only (consult.go)
	Model             string  `toml:"model"`
	UntrustedSessions *bool   `toml:"untrusted_sessions"`
	Memory            *string `toml:"memory"`   // a pointer: memory = "" is refused, not absent
	Standing          *bool   `toml:"standing"` // standing.go
}

// Grant is one parsed grant. Its fields are read through methods; slices
// returned are copies.
type Grant struct {
	id, file    string
	tool        string
	paths       []toolargs.Path
	hosts       []hostrule.Name
	writable    bool
	secret      string
	maxTaint    dataclass.Class
	resultClass dataclass.Class
	untrusted   bool
	expires     time.Time // zero: never
	mode        Mode
	model       string // consult only
	untrustedOK bool   // consult only: untrusted_sessions
	memory      Memory // consult only: which memory text may leave
	standing    bool   // standing.go
	canonical   []byte
	sum         string
}

// ID is the grant's id, unique in its set.
func (g Grant) ID() string { return g.id }

// File is the path of the file the grant came from ("" if made by [New]
// with no file).
func (g Grant) File() string { return g.file }

// Tool is the tool the grant decides.
func (g Grant) Tool() string { return g.tool }

// Paths are the grant's paths, sorted (nil for a hosts grant).
func (g Grant) Paths() []toolargs.Path { return slices.Clone(g.paths) }

// Hosts are the grant's host names, sorted (nil for a paths grant).
func (g Grant) Hosts() []hostrule.Name { return slices.Clone(g.hosts) }

// Writable reports whether a shell grant mounts its workdir read-write.
func (g Grant) Writable() bool { return g.writable }

// Secret is the name of the one secret a shell grant injects into the
// call's container, and "" for none.
func (g Grant) Secret() string { return g.secret }

// MaxTaint is the highest session taint under which the grant applies.
func (g Grant) MaxTaint() dataclass.Class { return g.maxTaint }

// ResultClass is the data class of results of calls the grant matches.
func (g Grant) ResultClass() dataclass.Class { return g.resultClass }

// Untrusted reports whether results of calls the grant matches are
// untrusted.
func (g Grant) Untrusted() bool { return g.untrusted }

// Expires is when the grant stops matching, and false if it never does.
func (g Grant) Expires() (time.Time, bool) { return g.expires, !g.expires.IsZero() }

// Mode is the grant's mode.
func (g Grant) Mode() Mode { return g.mode }

// ActiveAt reports whether the grant has not expired at now: it matches
// strictly before its expiry instant, never at or after it.
func (g Grant) ActiveAt(now time.Time) bool {
	return g.expires.IsZero() || now.Before(g.expires)
}

// Canonical is the grant's canonical form: compact JSON with the keys in
// this order, defaults written out, paths and hosts sorted, expires in
// UTC, and no file name:
//
//	{"id":…,"tool":…,"paths":[…]|"hosts":[…],["writable":…,]["secret":…,]
//	 "max_taint":…,"result_class":…,"untrusted":…,["expires":…,]"mode":…
//	 [,"model":…,"untrusted_sessions":…,"memory":…]}
//
// writable appears for shell grants only, secret and expires only when set,
// model, untrusted_sessions and memory for consult grants only.
func (g Grant) Canonical() []byte { return slices.Clone(g.canonical) }

// SHA256 is the lowercase hex SHA-256 of [Grant.Canonical].
func (g Grant) SHA256() string { return g.sum }

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// SecretPattern is what a secret's name looks like: the toolkit writes
// the value to a file of that name in the container's private tmpfs.
var SecretPattern = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)

// New parses one grant. file labels it (and errors are not prefixed with
// it: [ParseFile] does that).
func New(file string, s Spec) (Grant, error) {
	g := Grant{id: s.ID, file: file, tool: s.Tool}
	if s.ID == "" {
		return Grant{}, errors.New("id is missing or empty")
	}
	if !idPattern.MatchString(s.ID) {
		return Grant{}, fmt.Errorf("id %q must be 1 to 64 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit", s.ID)
	}
	if err := g.parseTool(s); err != nil {
		return Grant{}, err
	}
	var err error
	if s.Mode == "" {
		return Grant{}, errors.New("mode is missing (auto, ask or deny)")
	}
	if g.mode, err = ParseMode(s.Mode); err != nil {
		return Grant{}, err
	}
	if s.MaxTaint == "" {
		return Grant{}, errors.New("max_taint is missing (public, private or secret)")
	}
	if g.maxTaint, err = dataclass.Parse(s.MaxTaint); err != nil {
		return Grant{}, fmt.Errorf("max_taint: %v", err)
	}
	if g.mode == Deny && g.maxTaint != dataclass.Secret {
		return Grant{}, fmt.Errorf("a deny grant must have max_taint = \"secret\", not %q: otherwise it stops denying once the session's taint rises above it", s.MaxTaint)
	}
	if g.maxTaint == dataclass.Public && s.Tool != toolset.Consult {
		// consult is the exception: a public consult grant is the owner
		// saying "only public data may leave", refused by name today.
		return Grant{}, errors.New("max_taint = \"public\" never applies: every session starts at private")
	}
	g.resultClass = dataclass.Private
	if s.ResultClass != "" {
		if g.resultClass, err = dataclass.Parse(s.ResultClass); err != nil {
			return Grant{}, fmt.Errorf("result_class: %v", err)
		}
	}
	g.untrusted = s.Untrusted == nil || *s.Untrusted
	if s.Tool == toolset.ReadAttachment && !g.untrusted {
		return Grant{}, errors.New("read_attachment's results are always untrusted (a posted file is data from outside, even the owner's): drop untrusted = false")
	}
	if s.Expires != "" {
		t, err := time.Parse(time.RFC3339, s.Expires)
		if err != nil {
			return Grant{}, fmt.Errorf("expires %q is not an RFC 3339 time with a zone, such as \"2027-01-01T00:00:00Z\"", s.Expires)
		}
		g.expires = t
	}
	if err := g.checkConsult(s); err != nil {
		return Grant{}, err
	}
	if err := g.parseStanding(s); err != nil {
		return Grant{}, err
	}
	g.canonical, err = strict.Marshal(g.canonicalForm())
	if err != nil {
		return Grant{}, fmt.Errorf("canonical form: %v", err)
	}
	sum := sha256.Sum256(g.canonical)
	g.sum = hex.EncodeToString(sum[:])
	return g, nil
}

func (g *Grant) parseTool(s Spec) error {
	if s.Tool == "" {
		return errors.New("tool is missing")
	}
	if toolset.IsMemory(s.Tool) {
		return fmt.Errorf("tool %q is a memory tool: its policy is built into brokerd (always auto) and no grant may name it", s.Tool)
	}
	if toolset.IsMCP(s.Tool) {
		return g.parseMCP(s)
	}
	c, ok := ConstraintOf(s.Tool)
	if !ok {
		return fmt.Errorf("tool %q is not a tool grants can name (%s, or an MCP tool as mcp.SERVER.TOOL)", s.Tool, strings.Join(toolset.Of(toolset.ClassGranted), ", "))
	}
	if s.Writable != nil && s.Tool != toolset.Shell {
		return fmt.Errorf("%s does not take writable (only shell does; read_file never writes and write_file always does)", s.Tool)
	}
	g.writable = s.Writable != nil && *s.Writable
	if err := g.parseConsult(s); err != nil {
		return err
	}
	if s.Secret != "" {
		if s.Tool != toolset.Shell && s.Tool != toolset.Consult {
			return fmt.Errorf("%s does not take secret (only shell and consult do: the toolkit hands the secret to the command as a file, or to the endpoint as its key)", s.Tool)
		}
		if !SecretPattern.MatchString(s.Secret) {
			return fmt.Errorf("secret %q must be 1 to 64 uppercase letters, digits or '_', starting with a letter (a name from brokerd's [secrets], not a value)", s.Secret)
		}
		g.secret = s.Secret
	}
	switch c {
	case Paths:
		if s.Hosts != nil {
			return fmt.Errorf("%s takes paths, not hosts", s.Tool)
		}
		if len(s.Paths) == 0 {
			return fmt.Errorf("%s needs paths, at least one", s.Tool)
		}
		var err error
		if g.paths, err = parseList("path", s.Paths, parseGrantPath); err != nil {
			return err
		}
	case Hosts:
		if s.Paths != nil {
			return fmt.Errorf("%s takes hosts, not paths", s.Tool)
		}
		if len(s.Hosts) == 0 {
			return fmt.Errorf("%s needs hosts, at least one", s.Tool)
		}
		var err error
		if g.hosts, err = parseList("host", s.Hosts, hostrule.ParseName); err != nil {
			return err
		}
	}
	return nil
}

// parseGrantPath accepts an absolute path with no ".." element, cleans
// it (a trailing slash is harmless in a file the owner wrote), and refuses
// "/" and anything else [toolargs.ParsePath] refuses.
func parseGrantPath(s string) (toolargs.Path, error) {
	if s == "" || s[0] != '/' {
		return toolargs.Path{}, fmt.Errorf("path %q is relative; grant paths are absolute", s)
	}
	for _, el := range strings.Split(s, "/") {
		if el == ".." {
			return toolargs.Path{}, fmt.Errorf("path %q contains \"..\"; write the path it means", s)
		}
	}
	c := cleanSlashes(s)
	if c == "/" {
		return toolargs.Path{}, fmt.Errorf("path %q grants the whole file system; grant the directories meant", s)
	}
	p, err := toolargs.ParsePath(c)
	if err != nil {
		return toolargs.Path{}, err
	}
	return p, nil
}

// cleanSlashes removes empty and "." elements (the input has no "..").
func cleanSlashes(s string) string {
	var els []string
	for _, el := range strings.Split(s, "/") {
		if el != "" && el != "." {
			els = append(els, el)
		}
	}
	return "/" + strings.Join(els, "/")
}

type canonicalGrant struct {
	ID          string          `json:"id"`
	Tool        string          `json:"tool"`
	Paths       []toolargs.Path `json:"paths,omitempty"`
	Hosts       []hostrule.Name `json:"hosts,omitempty"`
	Writable    *bool           `json:"writable,omitempty"`
	Secret      string          `json:"secret,omitempty"`
	MaxTaint    dataclass.Class `json:"max_taint"`
	ResultClass dataclass.Class `json:"result_class"`
	Untrusted   bool            `json:"untrusted"`
	Expires     string          `json:"expires,omitempty"`
	Mode        Mode            `json:"mode"`
	Model       string          `json:"model,omitempty"`
	UntrustedOK *bool           `json:"untrusted_sessions,omitempty"`
	Memory      Memory          `json:"memory,omitempty"`
	Standing    bool            `json:"standing,omitempty"` // absent unless true: earlier grants keep their hashes
}

func (g *Grant) canonicalForm() canonicalGrant {
	c := canonicalGrant{ID: g.id, Tool: g.tool, Paths: g.paths, Hosts: g.hosts, Secret: g.secret,
		MaxTaint: g.maxTaint, ResultClass: g.resultClass, Untrusted: g.untrusted, Mode: g.mode, Standing: g.standing}
	if g.tool == toolset.Shell || toolset.IsMCP(g.tool) {
		w := g.writable
		c.Writable = &w
	}
	if g.tool == toolset.Consult {
		c.Model = g.model
		u := g.untrustedOK
		c.UntrustedOK = &u
		c.Memory = g.memory
	}
	if !g.expires.IsZero() {
		c.Expires = g.expires.UTC().Format(time.RFC3339Nano)
	}
	return c
}

// parseList parses each of a grant's paths or hosts, refuses a repeat, and
// sorts them, so that a grant's canonical form (and hash) does not depend
// on the order the owner wrote them in.
func parseList[T interface {
	comparable
	String() string
}](what string, in []string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for _, v := range in {
		t, err := parse(v)
		if err != nil {
			return nil, err
		}
		if slices.Contains(out, t) {
			return nil, fmt.Errorf("%s %q is listed twice", what, t)
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b T) int { return strings.Compare(a.String(), b.String()) })
	return out, nil
}
