package mcppin

import (
	"fmt"
	"strings"

	"wntrmute.dev/boxmaker/pkg/tool/toolargs"
)

// ParseRemoteURL parses a remote (Streamable HTTP) server's URL: an
// https URL under toolargs.URL's rules (a host name, never an IP
// literal; no port, no user information; canonical form), so that the
// host a grant must name, the host the egress proxy allows and the host
// the toolkit dials are one name. http is refused: the server's answers
// and the bearer secret would cross the network in clear.
func ParseRemoteURL(s string) (toolargs.URL, error) {
	if !strings.HasPrefix(s, "https://") {
		return toolargs.URL{}, fmt.Errorf("url %q: a remote server's url must be https:// (the secret and the server's answers never cross the network in clear)", s)
	}
	return toolargs.ParseURL(s)
}
