package daemon

import (
	"runtime/debug"
	"testing"
)

// TestVersion: the module's version and the commit's first 12 digits.
func TestVersion(t *testing.T) {
	if Version() == "" {
		t.Error("no version")
	}
	bi := &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "3f545bec1a2b3c4d5e6f"}}}
	if got := VersionString(bi); got != "v1.2.3 3f545bec1a2b" {
		t.Errorf("VersionString = %q", got)
	}
}
