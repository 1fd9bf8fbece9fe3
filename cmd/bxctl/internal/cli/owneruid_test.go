package cli

import (
	"fmt"
	"regexp"
)

// ownerUID sets a config's owner_uid to uid: in place where it has one,
// else added at the end under table ("" for the top level, at the start).
func ownerUID(uid uint32, table string) func(string) string {
	return func(s string) string {
		line := fmt.Sprintf("owner_uid = %d", uid)
		if re := regexp.MustCompile(`(?m)^owner_uid = \d+$`); re.MatchString(s) {
			return re.ReplaceAllString(s, line)
		}
		if table == "" {
			return line + "\n" + s
		}
		return s + "\n" + table + "\n" + line + "\n"
	}
}
