//go:build !boxmaker_testnet

package tools

import "crypto/x509"

// withTestRoots returns roots unchanged: a release toolkit trusts the
// image's CA bundle and nothing else.
func withTestRoots(roots *x509.CertPool) *x509.CertPool { return roots }
