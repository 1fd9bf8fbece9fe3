package up

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/checks/podmantest"
	"wntrmute.dev/boxmaker/checks/roletest"
	"wntrmute.dev/boxmaker/pkg/host/layout"
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
			state := filepath.Join(roletest.Dir(t), "state")
			if tt.config != "" {
				os.MkdirAll(filepath.Join(state, "config"), 0o700)
				os.WriteFile(filepath.Join(state, "config", "brokerd.toml"), []byte(tt.config), 0o600)
			}
			if err := MakeState(t.Context(), Options{State: state, Llama: "127.0.0.1:1", Model: "m", ToolImage: tt.image}); err != nil {
				t.Fatal(err)
			}
			r, err := podmanRole(state, "/opt/podman")
			if err != nil {
				t.Fatal(err)
			}
			if (r != nil) != tt.want {
				t.Fatalf("podmanRole = %+v, want a role: %v", r, tt.want)
			}
			if r != nil && strings.Join(r.argv, " ") != "/opt/podman system service --time=0 unix://"+layout.PodmanRun.SocketIn(state) {
				t.Errorf("argv = %q", r.argv)
			}
			b, _ := os.ReadFile(filepath.Join(state, "config", "brokerd.toml"))
			if tt.image != "" && !strings.Contains(string(b), "tool_image = \""+id+"\"") {
				t.Errorf("brokerd.toml lacks the image:\n%s", b)
			}
		})
	}
}

// TestUpStartsPodman starts the Podman role as `bxctl up` does, with the
// Podman checks/setup built (storage redirected to a temporary
// directory), and reaches its API on the socket brokerd's config names.
func TestUpStartsPodman(t *testing.T) {
	bin, conf, err := podmantest.Find()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skipf("no Podman: %v", err)
	}
	tmp := roletest.Dir(t)
	storage := filepath.Join(tmp, "storage.conf")
	os.WriteFile(storage, []byte(fmt.Sprintf("[storage]\ndriver = \"overlay\"\ngraphroot = %q\nrunroot = %q\n",
		filepath.Join(tmp, "root"), filepath.Join(tmp, "run"))), 0o600)
	t.Setenv("CONTAINERS_STORAGE_CONF", storage)
	t.Setenv("CONTAINERS_CONF", conf)
	t.Setenv("PODMAN_IGNORE_CGROUPSV1_WARNING", "1")
	state := filepath.Join(tmp, "state")
	if err := MakeState(t.Context(), Options{State: state, Llama: "127.0.0.1:1", Model: "m", ToolImage: "sha256:" + strings.Repeat("ab", 32)}); err != nil {
		t.Fatal(err)
	}
	r, err := podmanRole(state, bin)
	if err != nil || r == nil {
		t.Fatalf("podmanRole = %v, %v", r, err)
	}
	if err := start(r, "", state, layout.SingleUser(layout.ID{})); err != nil {
		t.Fatal(err)
	}
	defer stopAll([]*role{r})
	if err := waitReady(t.Context(), r, time.Minute); err != nil {
		t.Fatalf("%v\n%s", err, tail(r.log, 8))
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", layout.PodmanRun.SocketIn(state))
	}}}
	resp, err := client.Get("http://d/_ping")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /_ping on bxctl's Podman socket: %v %v", resp, err)
	}
	resp.Body.Close()
}
