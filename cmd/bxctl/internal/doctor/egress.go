package doctor

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"wntrmute.dev/boxmaker/pkg/tool/grant"
)

// Destinations are the config keys that name a network destination, each
// a row of docs/egress.md's table (TestDestinationsAreEgressRows checks
// them against it). A value in any other key that looks like an address
// is egress the document does not list: a problem.
var Destinations = []Destination{
	{Role: "inferproxy", File: "inferproxy.toml", Key: "upstream", What: "llama-server"},
	{Role: "gatewayd", File: "gatewayd.toml", Key: "url", What: "the Mattermost server"},
	{Role: "brokerd", File: "brokerd.toml", Key: "consult.endpoint", What: "the consult endpoint"},
	{Role: "memoryd", File: "memoryd.toml", Key: "honcho.url", What: "Honcho, the fleet memory"},
}

// Destination is one config key that names where a role connects.
type Destination struct {
	Role, File, Key, What string
}

// tailnet is Tailscale's CGNAT range, where the owner's other hosts are.
var tailnet = netip.MustParsePrefix("100.64.0.0/10")

// egress checks every address in the configs and grants against
// docs/egress.md: each must sit in a key the document lists; llama-server
// must be on the owner's own network (loopback, a private or a tailnet
// address, or a name doctor cannot place, which is a warning); Mattermost
// over plain HTTP off loopback carries the bot token in clear (a
// warning); grant hosts are the toolkit egress row, checked by brokerd's
// loader and at connect time by pkg/tool/netpolicy.
func (a *auditor) egress(in *install, set *grant.Set) {
	var problems, warnings, seen []string
	listed := map[string]bool{}
	for _, d := range Destinations {
		listed[d.Role+"."+d.Key] = true
	}
	roles := make([]string, 0, len(in.raw))
	for r := range in.raw {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	for _, role := range roles {
		walk(in.raw[role], "", func(key, v string) {
			if looksLikeAddress(v) && !listed[role+"."+key] {
				problems = append(problems, fmt.Sprintf("%s.toml %s names %q, a network destination docs/egress.md does not list", role, key, v))
			}
		})
	}
	if in.has("inferproxy") && in.infer.Upstream != "" {
		seen = append(seen, "llama-server "+in.infer.Upstream)
		host, _, err := net.SplitHostPort(in.infer.Upstream)
		switch place := placeHost(host); {
		case err != nil:
			problems = append(problems, fmt.Sprintf("inferproxy.toml upstream %q is not host:port", in.infer.Upstream))
		case place == "public":
			problems = append(problems, fmt.Sprintf("inferproxy.toml upstream %s is a public address: docs/egress.md lists llama-server on the owner's own hosts, and the conversation would leave them", in.infer.Upstream))
		case place == "unknown":
			warnings = append(warnings, fmt.Sprintf("inferproxy.toml upstream %s is a name doctor cannot place (it does not resolve names): make sure it is one of your hosts", in.infer.Upstream))
		}
	}
	if in.gateway != nil && in.gateway.URL != "" {
		seen = append(seen, "Mattermost "+in.gateway.URL)
		u, err := url.Parse(in.gateway.URL)
		switch {
		case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
			problems = append(problems, fmt.Sprintf("gatewayd.toml url %q is not an http(s) URL", in.gateway.URL))
		case u.Scheme == "http" && placeHost(u.Hostname()) != "loopback":
			warnings = append(warnings, fmt.Sprintf("gatewayd.toml url %s is plain HTTP off this host: the bot token and every message cross the network in clear", in.gateway.URL))
		}
	}
	if set != nil {
		n := 0
		for _, g := range set.Grants() {
			n += len(g.Hosts())
		}
		if n > 0 {
			seen = append(seen, fmt.Sprintf("%d grant hosts (toolkit egress, public addresses only)", n))
		}
	}
	switch {
	case len(problems) > 0:
		a.add("doctor-egress", Problem, "%s", strings.Join(append(problems, warnings...), "; "))
	case len(warnings) > 0:
		a.add("doctor-egress", Warn, "%s", strings.Join(warnings, "; "))
	case len(seen) == 0:
		a.add("doctor-egress", OK, "no configured destination: nothing connects out")
	default:
		a.add("doctor-egress", OK, "every destination is a row of docs/egress.md: %s", strings.Join(seen, ", "))
	}
}

// walk calls f for every string in a decoded TOML document (in arrays
// too), with its dotted key.
func walk(v any, key string, f func(key, s string)) {
	switch x := v.(type) {
	case map[string]any:
		ks := make([]string, 0, len(x))
		for k := range x {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			sub := k
			if key != "" {
				sub = key + "." + k
			}
			walk(x[k], sub, f)
		}
	case []any:
		for _, e := range x {
			walk(e, key, f)
		}
	case []map[string]any:
		for _, e := range x {
			walk(e, key, f)
		}
	case string:
		f(key, x)
	}
}

// looksLikeAddress is whether a config value names a network destination:
// a URL other than unix:// or file://, or host:port with a port from 1
// to 65535 written as one (not an image ID's 64 digits).
func looksLikeAddress(s string) bool {
	if scheme, _, ok := strings.Cut(s, "://"); ok {
		return scheme != "unix" && scheme != "file"
	}
	if strings.ContainsAny(s, "/ ") {
		return false
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return false
	}
	n, err := strconv.ParseUint(port, 10, 16)
	return err == nil && n > 0 && len(port) <= 5
}

// placeHost says where a host is: "loopback", "local" (a private or
// tailnet address, or a tailnet or .local name), "public", or "unknown"
// (a name doctor does not resolve).
func placeHost(host string) string {
	if host == "localhost" {
		return "loopback"
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		if strings.HasSuffix(host, ".ts.net") || strings.HasSuffix(host, ".local") || !strings.Contains(host, ".") {
			return "local"
		}
		return "unknown"
	}
	switch ip = ip.Unmap(); {
	case ip.IsLoopback():
		return "loopback"
	case ip.IsPrivate() || ip.IsLinkLocalUnicast() || tailnet.Contains(ip):
		return "local"
	}
	return "public"
}
