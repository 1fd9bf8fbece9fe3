// Package tailnet reads the example tailnet policy, deploy/tailnet-policy.hujson,
// and says what it lets the Boxmaker host's node (tag:boxmaker) reach.
//
// Invariant: [Parse] accepts only a policy made of the sections Boxmaker's
// example uses (tagOwners, hosts, grants, tests), decoded strictly after
// HuJSON's comments and trailing commas are removed; [Policy.From] lists
// every destination a tag may reach, counting every rule whose source
// could include it ("*", the tag itself), so a widening cannot hide behind
// a wildcard.
package tailnet

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

// Policy is the part of Tailscale's policy file the example holds.
type Policy struct {
	TagOwners map[string][]string `json:"tagOwners"`
	Hosts     map[string]string   `json:"hosts"`
	Grants    []Grant             `json:"grants"`
	Tests     []Test              `json:"tests"`
}

// Grant is a network-level grant: src may reach dst on ip.
type Grant struct {
	Src []string `json:"src"`
	Dst []string `json:"dst"`
	IP  []string `json:"ip"`
}

// Test is one of the policy's own tests.
type Test struct {
	Src    string   `json:"src"`
	Accept []string `json:"accept"`
	Deny   []string `json:"deny"`
}

// Parse reads a HuJSON policy.
func Parse(data []byte) (Policy, error) {
	std, err := Standardize(data)
	if err != nil {
		return Policy{}, err
	}
	var p Policy
	if err := strict.Unmarshal(std, &p); err != nil {
		return Policy{}, fmt.Errorf("parse tailnet policy: %w", err)
	}
	return p, nil
}

// From lists what tag may reach, as "dst ip" pairs (a host alias and
// "tcp:443"), sorted: every grant whose sources include tag, "*" or
// autogroup:tagged.
func (p Policy) From(tag string) []string {
	var out []string
	for _, g := range p.Grants {
		if !slices.Contains(g.Src, tag) && !slices.Contains(g.Src, "*") && !slices.Contains(g.Src, "autogroup:tagged") {
			continue
		}
		ips := g.IP
		if len(ips) == 0 {
			ips = []string{"(no ip: every port)"}
		}
		for _, d := range g.Dst {
			for _, ip := range ips {
				out = append(out, d+" "+ip)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// To lists the sources that may reach tag.
func (p Policy) To(tag string) []string {
	var out []string
	for _, g := range p.Grants {
		if slices.Contains(g.Dst, tag) || slices.Contains(g.Dst, "*") {
			out = append(out, g.Src...)
		}
	}
	return out
}

// Standardize turns HuJSON into JSON: it removes // and /* */ comments
// outside strings and a comma before a closing bracket or brace. The
// result is for a strict JSON decoder, which checks everything else.
func Standardize(b []byte) ([]byte, error) {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '"':
			j := i + 1
			for ; j < len(b) && b[j] != '"'; j++ {
				if b[j] == '\\' {
					j++
				}
			}
			if j >= len(b) {
				return nil, errors.New("standardize HuJSON: unterminated string")
			}
			out = append(out, b[i:j+1]...)
			i = j
		case c == '/' && i+1 < len(b) && b[i+1] == '/':
			for i < len(b) && b[i] != '\n' {
				i++
			}
			if i < len(b) {
				out = append(out, '\n')
			}
		case c == '/' && i+1 < len(b) && b[i+1] == '*':
			end := strings.Index(string(b[i+2:]), "*/")
			if end < 0 {
				return nil, errors.New("standardize HuJSON: unterminated comment")
			}
			out = append(out, ' ')
			i += 2 + end + 1
		default:
			out = append(out, c)
		}
	}
	return dropTrailingCommas(out), nil
}

// dropTrailingCommas removes each comma (outside strings) whose next
// non-space byte closes an array or object.
func dropTrailingCommas(b []byte) []byte {
	out := make([]byte, 0, len(b))
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			out = append(out, c)
			if c == '\\' && i+1 < len(b) {
				i++
				out = append(out, b[i])
			} else if c == '"' {
				inString = false
			}
			continue
		}
		if c == '"' {
			inString = true
		}
		if c == ',' {
			j := i + 1
			for j < len(b) && strings.IndexByte(" \t\r\n", b[j]) >= 0 {
				j++
			}
			if j < len(b) && (b[j] == ']' || b[j] == '}') {
				continue
			}
		}
		out = append(out, c)
	}
	return out
}
