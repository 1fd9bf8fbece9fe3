package runner

import (
	"strings"

	"wntrmute.dev/boxmaker/pkg/toolinput"
)

// redact replaces every exact occurrence of the call's secret value in
// the tool's stdout and stderr with "[secret NAME]", so a command that
// prints its token does not hand it to the model, the session log and
// the audit record (review 14). It cannot catch an encoded or split
// copy (base64, a prefix cut off by the output cap): the grant's secret
// is still exposed to whatever the tool runs.
func redact(out Output, sec *toolinput.Secret) Output {
	if sec == nil {
		return out
	}
	v := sec.Value.Reveal()
	if v == "" {
		return out
	}
	mark := "[secret " + sec.Name + "]"
	out.Stdout = strings.ReplaceAll(out.Stdout, v, mark)
	out.Stderr = strings.ReplaceAll(out.Stderr, v, mark)
	return out
}
