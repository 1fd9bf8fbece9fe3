// Package units is the table of systemd units that run Boxmaker on a host,
// one per role, derived from package layout's table: the role's user, its
// network, the state entries its mount namespace holds (read-only, with
// its own writable entries and the socket directories of its pairs; every
// other entry made inaccessible), its root filesystem (the role image's,
// read-only; brokerd's is the host's, since its runner hands granted host
// paths to Podman), the systemd hardening it tolerates, its credentials
// (only through LoadCredentialEncrypted=) and the exposure bound that
// `systemd-analyze security` must not exceed for it. [Deployment] is the
// whole host as data, modules/deployment.json (docs/units.md);
// `bxctl install` and the NixOS module both substitute its placeholders
// and nothing else.
//
// Invariants, each held by a test over [Table]:
//   - every unit runs as its role's own user and group, never root, with
//     NoNewPrivileges=yes, an empty capability bounding set, no ambient
//     capability, ProtectSystem=strict and a system call filter;
//   - no unit sets Environment= or EnvironmentFile= (a secret reaches a
//     role only as a credential);
//   - a unit loads exactly its role's credentials of [Credentials]: each
//     one that is not optional always, an optional one (Honcho's key)
//     only when the owner gives it, never another role's;
//   - loopd and brokerd have no network at all (PrivateNetwork=yes and
//     AF_UNIX only); every other role's IP traffic is denied except to its
//     [Net] placeholder's addresses, and no role may bind an IP socket;
//   - a unit's writable paths are exactly the layout entries its role
//     writes, and every entry of the layout its role neither owns, is the
//     group of, nor connects to, is inaccessible;
//   - no unit reaches a user manager: brokerd's, on the host's root,
//     sees of its runtime directory only its Podman socket's directory
//     (an empty read-only tmpfs over /run/user/<uid>, that one directory
//     bound back) and not the system bus, and no unit binds anything
//     else of /run/user;
//   - no unit's value carries a placeholder the contract does not define.
package units
