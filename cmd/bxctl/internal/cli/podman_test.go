package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPodmanRoleOnlyForItsOwnSocket: bxctl up runs a Podman service only
// when brokerd's config names bxctl's socket, which the first config does
// when given a tool image.
func TestPodmanRoleOnlyForItsOwnSocket(t *testing.T) {
	id := "sha256:" + strings.Repeat("ab", 32)
	for _, tt := range []struct {
		name, image, config string
		want                bool
	}{
		{"no image, no runner", "", "", false},
		{"image given", id, "", true},
		{"owner's own socket", "", "[runner]\npodman_socket = \"/run/user/1000/podman/podman.sock\"\ntool_image = \"" + id + "\"\n", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "state")
			if tt.config != "" {
				os.MkdirAll(filepath.Join(state, "config"), 0o700)
				os.WriteFile(filepath.Join(state, "config", "brokerd.toml"), []byte(tt.config), 0o600)
			}
			if err := layout(t.Context(), state, "127.0.0.1:1", "m", tt.image); err != nil {
				t.Fatal(err)
			}
			r, err := podmanRole(state, "/opt/podman")
			if err != nil {
				t.Fatal(err)
			}
			if (r != nil) != tt.want {
				t.Fatalf("podmanRole = %+v, want a role: %v", r, tt.want)
			}
			if r != nil && strings.Join(r.argv, " ") != "/opt/podman system service --time=0 unix://"+podmanSocket(state) {
				t.Errorf("argv = %q", r.argv)
			}
			b, _ := os.ReadFile(filepath.Join(state, "config", "brokerd.toml"))
			if tt.image != "" && !strings.Contains(string(b), "tool_image = \""+id+"\"") {
				t.Errorf("brokerd.toml lacks the image:\n%s", b)
			}
		})
	}
}
