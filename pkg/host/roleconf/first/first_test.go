package first

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/inferproxy"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/loopd"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd"
)

func uid(n uint32) *uint32 { return &n }

// check is a loader's result, with any key the table decides (which no
// first config may hold) an error.
func check[T any](c T, leftover []string, err error) (T, error) {
	if err == nil && len(leftover) > 0 {
		err = fmt.Errorf("keys the layout table decides: %q", leftover)
	}
	return c, err
}

// params are the cases every first config is tried with: one user, a
// user per role with root (uid 0) or another uid the owner, a tool image
// with bxctl up's Podman service or bxctl install's rootless one.
var params = map[string]Params{
	"one user":       {State: "/s", Llama: "127.0.0.1:8080", Model: "m"},
	"root the owner": {State: "/s", Llama: "127.0.0.1:8080", Model: "m", OwnerUID: uid(0)},
	"uid 1000 owner": {State: "/s", Llama: "127.0.0.1:8080", Model: "m", OwnerUID: uid(1000)},
	"tool image, up": {State: "/s", Llama: "127.0.0.1:8080", Model: "m", ToolImage: "sha256:" + strings.Repeat("ab", 32)},
	"tool image, rootless": {State: "/s", Llama: "127.0.0.1:8080", Model: "m", ToolImage: "sha256:" + strings.Repeat("ab", 32),
		PodmanSocket: "/run/user/61004/podman/podman.sock", OwnerUID: uid(0)},
}

// TestRoundTrip: each first config decodes to exactly the value of its
// role's type it was encoded from (an owner_uid of 0 kept, nothing
// added), and its role's own loader accepts it.
func TestRoundTrip(t *testing.T) {
	parse := map[string]func([]byte, string) error{
		layout.Inferproxy: func(b []byte, n string) error { _, err := check(inferproxy.Parse(b, n, "/s")); return err },
		layout.Loopd:      func(b []byte, n string) error { _, err := check(loopd.Parse(b, n, "/s")); return err },
		layout.Brokerd:    func(b []byte, n string) error { _, err := check(brokerd.Parse(b, n, "/s")); return err },
		layout.Memoryd:    func(b []byte, n string) error { _, err := check(memoryd.Parse(b, n, "/s")); return err },
	}
	if len(Configs) != len(parse) {
		t.Fatalf("%d first configs, want one for each of %d roles", len(Configs), len(parse))
	}
	for name, p := range params {
		for _, c := range Configs {
			t.Run(name+"/"+c.Role, func(t *testing.T) {
				text := c.Text(p)
				want := c.Value(p)
				got := reflect.New(reflect.TypeOf(want))
				md, err := toml.Decode(text, got.Interface())
				if err != nil {
					t.Fatalf("%v\n%s", err, text)
				}
				if u := md.Undecoded(); len(u) > 0 {
					t.Errorf("keys the type does not have: %v", u)
				}
				if !reflect.DeepEqual(got.Elem().Interface(), want) {
					t.Errorf("decodes to\n%+v\nwant\n%+v\nfrom\n%s", got.Elem().Interface(), want, text)
				}
				if err := parse[c.Role]([]byte(text), c.Role+".toml"); err != nil {
					t.Errorf("%s's loader refuses its first config: %v\n%s", c.Role, err, text)
				}
				if !strings.HasPrefix(text, "# Written by bxctl up; yours to edit (deploy/"+c.Role+".toml") {
					t.Errorf("no header:\n%s", text)
				}
			})
		}
	}
}

// TestOwnerUID: with a user per role, brokerd's owner_uid and loopd's
// [jobs] owner_uid name the owner, root's 0 included; with one user
// neither is written (the daemons' own uid is the owner's).
func TestOwnerUID(t *testing.T) {
	for name, p := range params {
		for _, c := range Configs {
			if c.Role != layout.Brokerd && c.Role != layout.Loopd {
				continue
			}
			text := c.Text(p)
			if has := strings.Contains(text, "\nowner_uid = "); has != (p.OwnerUID != nil) {
				t.Errorf("%s, %s: owner_uid written: %v, want %v:\n%s", name, c.Role, has, p.OwnerUID != nil, text)
			}
			if p.OwnerUID != nil && !strings.Contains(text, "\nowner_uid = "+strconv.FormatUint(uint64(*p.OwnerUID), 10)+"\n") {
				t.Errorf("%s, %s: owner_uid is not %d:\n%s", name, c.Role, *p.OwnerUID, text)
			}
		}
	}
}

// TestPaths: each config is config/<role>.toml.
func TestPaths(t *testing.T) {
	for _, c := range Configs {
		if c.Path("/s") != "/s/config/"+c.Role+".toml" {
			t.Errorf("%s's config is at %s", c.Role, c.Path("/s"))
		}
	}
}

// TestRunnerNamesTheGivenPodman: bxctl install's brokerd config names its
// user's rootless socket; bxctl up's names the service in run/podman.
func TestRunnerNamesTheGivenPodman(t *testing.T) {
	var broker File
	for _, c := range Configs {
		if c.Role == layout.Brokerd {
			broker = c
		}
	}
	up := broker.Text(Params{State: "/s", ToolImage: "sha256:x"})
	inst := broker.Text(Params{State: "/s", ToolImage: "sha256:x", PodmanSocket: "/run/user/61004/podman/podman.sock"})
	if !strings.Contains(up, `podman_socket = "/s/run/podman/podman.sock"`) {
		t.Errorf("bxctl up's brokerd config:\n%s", up)
	}
	if !strings.Contains(inst, `podman_socket = "/run/user/61004/podman/podman.sock"`) || strings.Contains(inst, "/s/run/podman") {
		t.Errorf("bxctl install's brokerd config:\n%s", inst)
	}
	if none := broker.Text(Params{State: "/s"}); strings.Contains(none, "[runner]\n") {
		t.Errorf("a [runner] without a tool image:\n%s", none)
	}
}
