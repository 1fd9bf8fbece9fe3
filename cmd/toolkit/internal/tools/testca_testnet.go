//go:build boxmaker_testnet

package tools

import "crypto/x509"

// withTestRoots adds the test-only CA of checks/fake/chatapi, so that a
// real-container consult or remote MCP test verifies TLS end to end
// against a server it controls. Only builds tagged boxmaker_testnet have it, and brokerd
// refuses to start with such an image (runbook tool-image-testnet).
func withTestRoots(roots *x509.CertPool) *x509.CertPool {
	p := roots.Clone()
	p.AppendCertsFromPEM([]byte(testCA))
	return p
}

// testCA is checks/fake/chatapi's CA, the same text (a test checks).
const testCA = `-----BEGIN CERTIFICATE-----
MIIBsjCCAVigAwIBAgIBATAKBggqhkjOPQQDAjA/MT0wOwYDVQQDDDRib3htYWtl
ciB0ZXN0LW9ubHkgQ0EgKGJveG1ha2VyX3Rlc3RuZXQgYnVpbGRzIG9ubHkpMB4X
DTI2MDEwMTAwMDAwMFoXDTQ2MDEwMTAwMDAwMFowPzE9MDsGA1UEAww0Ym94bWFr
ZXIgdGVzdC1vbmx5IENBIChib3htYWtlcl90ZXN0bmV0IGJ1aWxkcyBvbmx5KTBZ
MBMGByqGSM49AgEGCCqGSM49AwEHA0IABNbJqaB6+T2Y1Wo72Krl2/BOyQGe/ZJz
mMpjiPjKcyMROvwqX7wFPGKhBerZ0JZDY6av5b8NEE3vNyUwIKMVFyCjRTBDMA4G
A1UdDwEB/wQEAwICBDASBgNVHRMBAf8ECDAGAQH/AgEAMB0GA1UdDgQWBBQPacEW
I2Lgt09vACd1w8lw9gl+BDAKBggqhkjOPQQDAgNIADBFAiEAuWjBZyeLlnvqmGqI
pH/jrKkaGWM+Yz019DL02FQDc30CIHHmkD3wg078iYSUodwBlwJ38U1eXZjVuEcY
0Gnr8JgT
-----END CERTIFICATE-----
`
