// Package clients runs the official Mattermost and Honcho clients, from
// the npm registry, against Boxmaker's fakes (checks/fake/mattermost,
// checks/fake/honcho), for the differential suites in gatewayd's and
// memoryd's client packages (docs/clients.md).
//
// # Invariant
//
// A suite never passes without having run the official client: with no
// Node or no installed packages it skips with one line, and under CI=true
// it fails instead. The packages are exactly package-lock.json's, installed
// by checks/npm-setup into ~/.cache/boxmaker/npm/<the lockfile's sha256>,
// so a changed lockfile is never served by an older install. Requests are
// compared by [Shape] (keys and JSON types, never values), and answers
// are checked against the clients' own TypeScript declarations by tsc
// ([CheckTypes]), never by a copy of them written here.
package clients
