package daemon

import "runtime/debug"

// Version is this binary's version as status shows it: the module's
// version and, when the build recorded it, the first 12 digits of the
// commit; "unknown" when the binary carries no build information.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	return versionOf(bi)
}

// VersionString is bi's version as Version words it (package procinfo
// reads another process's).
func VersionString(bi *debug.BuildInfo) string { return versionOf(bi) }

func versionOf(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return v
}
