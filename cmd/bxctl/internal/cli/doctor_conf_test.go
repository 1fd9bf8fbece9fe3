package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/layout"
)

// gatewayConf is a gatewayd.toml gatewayd's own loader accepts.
func gatewayConf(state, url, token string) string {
	return fmt.Sprintf("url = %q\ntoken = %q\n\n[allow]\nusers = [\"8d5qj1c3kpgz5e9fxw7ty4bn3h\"]\n", url, token)
}

func chmod(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func writeIdentity(t *testing.T, in *installation, name, text string) {
	t.Helper()
	dir := layout.Memory.In(in.state)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	in.own(t, filepath.Join(dir, name), layout.Memoryd, layout.Memoryd, 0o600)
}
