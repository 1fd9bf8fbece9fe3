package units

import (
	"fmt"
	"slices"
	"sort"
)

// Repeatable is, per section, the keys of the table that systemd lets a
// unit give more than once, each occurrence adding to the list
// (systemd.unit(5), systemd.exec(5), systemd.resource-control(5)): they
// are lists in modules/deployment.json's `repeatable` and the NixOS
// module sets them as Nix lists. Every other key of the table is
// single-valued (a repeat would silently replace the earlier value) and
// the module sets it as a string: nixpkgs' checkService compares Type=
// and Restart= with `elem` on the raw value (nixos/lib/systemd-lib.nix
// assertValueOneOf), so a one-element list is refused there, and
// nixpkgs' unitOption merges lists by concatenation and strings by
// equality, so an owner's list adds to a list and a string must agree.
// ExecStart= repeats only in a Type=oneshot unit, and no unit of the
// table is one, so it is single here.
var Repeatable = map[string][]string{
	"Unit": {"Documentation", "After", "Before", "Wants", "Requires", "BindsTo"},
	"Service": {"RestartPreventExitStatus", "TemporaryFileSystem", "BindReadOnlyPaths", "BindPaths",
		"InaccessiblePaths", "LoadCredentialEncrypted", "RestrictAddressFamilies", "IPAddressDeny",
		"IPAddressAllow", "SocketBindDeny", "SystemCallFilter", "CapabilityBoundingSet", "AmbientCapabilities"},
	"Install": {"WantedBy", "RequiredBy"},
}

// Single is, per section, the table's keys that systemd takes once.
var Single = map[string][]string{
	"Unit": {"Description"},
	"Service": {"Type", "User", "Group", "ExecStart", "Restart", "RestartSec", "RootDirectory", "MountAPIVFS",
		"PrivateNetwork", "NoNewPrivileges", "ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices",
		"PrivateIPC", "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs", "ProtectControlGroups",
		"ProtectClock", "ProtectHostname", "ProtectProc", "ProcSubset", "RestrictNamespaces", "RestrictRealtime",
		"RestrictSUIDSGID", "LockPersonality", "MemoryDenyWriteExecute", "SystemCallArchitectures",
		"SystemCallErrorNumber", "UMask", "DevicePolicy", "KeyringMode", "RemoveIPC"},
}

// IsRepeatable reports whether key of section may be given more than once.
func IsRepeatable(section, key string) bool { return slices.Contains(Repeatable[section], key) }

// CheckShapes is an error naming each key of units that is in neither
// [Repeatable] nor [Single] (a new key needs a decision), or that is
// single and has more than one value.
func CheckShapes(units []Unit) error {
	var bad []string
	for _, u := range units {
		for _, s := range u.Sections {
			for _, k := range s.Keys {
				rep, single := IsRepeatable(s.Name, k.Name), slices.Contains(Single[s.Name], k.Name)
				switch {
				case rep == single:
					bad = append(bad, fmt.Sprintf("%s [%s] %s is in neither or both of Repeatable and Single", u.Name, s.Name, k.Name))
				case single && len(k.Values) != 1:
					bad = append(bad, fmt.Sprintf("%s [%s] %s is single-valued but has %d values", u.Name, s.Name, k.Name, len(k.Values)))
				}
			}
		}
	}
	if bad != nil {
		sort.Strings(bad)
		return fmt.Errorf("units: %q; see docs/runbook.md#nix-deployment-version", bad)
	}
	return nil
}
