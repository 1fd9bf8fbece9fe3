// Package honchoconf is memoryd.toml's [honcho] table and Honcho's
// resource names: the checks memoryd runs before it talks to Honcho,
// which `bxctl doctor` runs too (a key pasted in clear is refused by
// both).
//
// Invariant: [Parse] returns [Settings] only for a table whose every
// value is usable: an http(s) URL (plain http only to loopback or a
// private or tailnet address), a key that is a secret ref and never a
// key, ids that match Honcho's rule, and bounds within their limits.
package honchoconf

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/secret"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

// Config is memoryd.toml's optional [honcho] table, as written; [Parse]
// turns it into [Settings]. deploy/memoryd.toml documents each key.
type Config struct {
	URL                string  `toml:"url"`                 // Honcho's base URL, without /v3
	Key                string  `toml:"key"`                 // a secret ref ("credential:honcho-key"), never the key; empty: no key
	Peer               string  `toml:"peer"`                // this agent's peer name
	SpeakerPeer        string  `toml:"speaker_peer"`        // the peer the owner's (speaker's) messages come from; default "owner"
	MaxClass           string  `toml:"max_class"`           // turns above this class are not written; "public" or "private" (the default)
	ReadBoundMS        int64   `toml:"read_bound_ms"`       // how long recall and ask_memory wait on Honcho; default DefaultReadBound
	TrustedWorkspace   string  `toml:"trusted_workspace"`   // clean turns go here
	UntrustedWorkspace string  `toml:"untrusted_workspace"` // every other written turn goes here
	TimeoutMS          int64   `toml:"timeout_ms"`          // per request; default DefaultTimeout
	Workspaces         []Other `toml:"workspaces"`          // other agents' workspaces memoryd may read
}

// Other is another workspace memoryd may read, with the owner's trust.
type Other struct {
	Name  string `toml:"name"`
	Trust string `toml:"trust"` // "trusted" or "untrusted" (the default)
}

// Request timeouts (milliseconds in the config).
const (
	DefaultTimeout = 10 * time.Second
	MinTimeout     = 100 * time.Millisecond
	MaxTimeout     = 120 * time.Second

	DefaultReadBound = 1500 * time.Millisecond
	MaxReadBound     = 30 * time.Second
	// DefaultSpeaker is the speaker's peer when none is configured.
	DefaultSpeaker = "owner"
)

// Settings is a checked [Config]: every field holds a usable value.
type Settings struct {
	URL       *url.URL   // http or https, no user info, query or fragment, no trailing slash
	Key       secret.Ref // Backend() == 0: no key
	Peer      ID
	Speaker   ID
	MaxClass  dataclass.Class // never secret: a secret turn never leaves the host
	ReadBound time.Duration
	Trusted   ID
	Untrusted ID
	Timeout   time.Duration
	Others    []Source
}

// Source is a workspace memoryd reads, with the owner's trust in it.
type Source struct {
	ID      ID
	Trusted bool
}

// HasKey reports whether a key is configured.
func (s Settings) HasKey() bool { return s.Key.Backend() != 0 }

// Parse checks a [honcho] table. Its errors start with "honcho" (the
// caller prefixes the file's name) and end with a runbook anchor; an
// error about the key never quotes it.
func Parse(c Config) (Settings, error) {
	bad := func(format string, a ...any) (Settings, error) {
		return Settings{}, fmt.Errorf("honcho: "+format+"; see docs/runbook.md#honcho-config-refused", a...)
	}
	var s Settings
	u, err := parseURL(c.URL)
	if err != nil {
		return bad("url: %v", err)
	}
	s.URL = u
	if c.Key != "" {
		if looksLikeKey(c.Key) {
			return Settings{}, fmt.Errorf("honcho: key looks like a Honcho key itself (the value is not shown); name where it is kept instead, e.g. \"credential:honcho-key\"; see docs/runbook.md#honcho-key-in-config")
		}
		r, err := secret.ParseRef(c.Key)
		if err != nil {
			// ParseRef's errors never quote the text.
			return Settings{}, fmt.Errorf("honcho: key: %v; see docs/runbook.md#honcho-key-in-config", err)
		}
		s.Key = r
	}
	for _, f := range []struct {
		name string
		v    string
		dst  *ID
	}{{"peer", c.Peer, &s.Peer}, {"trusted_workspace", c.TrustedWorkspace, &s.Trusted}, {"untrusted_workspace", c.UntrustedWorkspace, &s.Untrusted}} {
		if f.v == "" {
			return bad("%s is required", f.name)
		}
		id, err := ParseID(f.v)
		if err != nil {
			return bad("%s: %v", f.name, err)
		}
		*f.dst = id
	}
	speaker := c.SpeakerPeer
	if speaker == "" {
		speaker = DefaultSpeaker
	}
	if s.Speaker, err = ParseID(speaker); err != nil {
		return bad("speaker_peer: %v", err)
	}
	if s.Speaker == s.Peer {
		// The label of a message is its author: the owner's words must
		// never read as the agent's, nor the reverse.
		return bad("speaker_peer and peer must differ")
	}
	s.MaxClass = dataclass.Private
	switch c.MaxClass {
	case "", "private":
	case "public":
		s.MaxClass = dataclass.Public
	case "secret":
		return Settings{}, fmt.Errorf("honcho: max_class \"secret\" is refused: a secret turn never leaves the host; see docs/runbook.md#honcho-secret-class")
	default:
		return bad("max_class is %q, want \"public\" or \"private\"", c.MaxClass)
	}
	s.ReadBound = DefaultReadBound
	if c.ReadBoundMS != 0 {
		s.ReadBound = time.Duration(c.ReadBoundMS) * time.Millisecond
		if s.ReadBound < 10*time.Millisecond || s.ReadBound > MaxReadBound {
			return bad("read_bound_ms is %d, want 10 to %d", c.ReadBoundMS, MaxReadBound.Milliseconds())
		}
	}
	if s.Trusted == s.Untrusted {
		// One workspace would file untrusted turns beside clean ones:
		// the label is per workspace (P23).
		return bad("trusted_workspace and untrusted_workspace must differ")
	}
	s.Timeout = DefaultTimeout
	if c.TimeoutMS != 0 {
		s.Timeout = time.Duration(c.TimeoutMS) * time.Millisecond
		if s.Timeout < MinTimeout || s.Timeout > MaxTimeout {
			return bad("timeout_ms is %d, want %d to %d", c.TimeoutMS, MinTimeout.Milliseconds(), MaxTimeout.Milliseconds())
		}
	}
	seen := map[ID]bool{s.Trusted: true, s.Untrusted: true}
	for i, o := range c.Workspaces {
		id, err := ParseID(o.Name)
		if err != nil {
			return bad("workspaces[%d].name: %v", i, err)
		}
		if seen[id] {
			return bad("workspaces[%d].name %q is listed twice or is one of this agent's own", i, o.Name)
		}
		seen[id] = true
		w := Source{ID: id}
		switch o.Trust {
		case "", "untrusted":
		case "trusted":
			w.Trusted = true
		default:
			return bad("workspaces[%d].trust is %q, want \"trusted\" or \"untrusted\"", i, o.Trust)
		}
		s.Others = append(s.Others, w)
	}
	return s, nil
}

// looksLikeKey reports whether a key setting is a credential rather than
// a ref: Honcho's keys are JWTs, whose base64 header always begins
// "eyJ" ('{"'), and one may be pasted with its "Bearer " prefix. A ref
// without a backend names a systemd credential, a short file name.
func looksLikeKey(s string) bool {
	if strings.Contains(s, "eyJ") || strings.HasPrefix(strings.ToLower(s), "bearer") {
		return true
	}
	_, _, found := strings.Cut(s, ":")
	return !found && (len(s) > 64 || strings.Count(s, ".") >= 2)
}

// parseURL accepts https anywhere, and plain http only to this host or
// across the tailnet (WireGuard encrypts it): the turns and the key would
// otherwise cross a network in clear text.
func parseURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, fmt.Errorf("is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("does not parse")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("scheme %q, want https (or http to this host or the tailnet)", u.Scheme)
	case u.Host == "" || u.Opaque != "":
		return nil, fmt.Errorf("has no host")
	case u.User != nil:
		return nil, fmt.Errorf("carries user info; put the key in the secret store and name it in key")
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return nil, fmt.Errorf("has a query or fragment")
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	if strings.HasSuffix(u.Path, "/v3") {
		return nil, fmt.Errorf("ends in /v3; give the base URL, memoryd adds /v3 itself")
	}
	if u.Scheme == "http" && !privateHost(u.Hostname()) {
		return nil, fmt.Errorf("plain http to %s would carry turns in clear text; use https, or http only to localhost or a tailnet address", u.Hostname())
	}
	return u, nil
}

// Tailscale's address ranges: CGNAT 100.64.0.0/10 and its ULA prefix.
var tailnet = []netip.Prefix{netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("fd7a:115c:a1e0::/48")}

func privateHost(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".ts.net") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	if ip.IsLoopback() {
		return true
	}
	for _, p := range tailnet {
		if p.Contains(ip.Unmap()) {
			return true
		}
	}
	return false
}
