package mcppin

import (
	"fmt"
	"net/url"
	"strings"

	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
)

// ParseRemoteURL parses a remote (Streamable HTTP) server's URL: an
// https URL under toolargs.URL's rules (a host name, never an IP
// literal; no port, no user information; canonical form), so that the
// host a grant must name, the host the egress proxy allows and the host
// the toolkit dials are one name. http is refused: the server's answers
// and the bearer secret would cross the network in clear. The host must
// be written in lower case, since Go's transport dials the host as
// written and the egress proxy's dialer compares it with the folded one
// (an upper-case host could never be reached, only refused). A query or
// fragment is refused: the URL is echoed in denials the model reads, the
// chat and the audit log, so a key in it (as some vendors' docs suggest)
// would leak; a secret belongs in the declaration's secret.
func ParseRemoteURL(s string) (toolargs.URL, error) {
	if !strings.HasPrefix(s, "https://") {
		return toolargs.URL{}, fmt.Errorf("url %q: a remote server's url must be https:// (the secret and the server's answers never cross the network in clear)", s)
	}
	u, err := toolargs.ParseURL(s)
	if err != nil {
		return toolargs.URL{}, err
	}
	// ParseURL has parsed s already; this cannot fail.
	p, _ := url.Parse(s)
	switch {
	case p.Hostname() != u.Host().String():
		return toolargs.URL{}, fmt.Errorf("url %q: write the host in lower case, %q (it is dialled as written)", s, u.Host().String())
	case p.RawQuery != "" || p.ForceQuery || p.Fragment != "" || strings.Contains(s, "#"):
		return toolargs.URL{}, fmt.Errorf("url %q: a remote server's url takes no query or fragment (the url is shown in denials, the chat and the audit log; put a key in the declaration's secret)", s)
	}
	return u, nil
}
