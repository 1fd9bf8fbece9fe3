package up

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/checks/roletest"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/first"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
)

func TestLayoutWritesConfigsOnce(t *testing.T) {
	state := filepath.Join(roletest.Dir(t), "state")
	if err := MakeState(t.Context(), Options{State: state, Llama: "127.0.0.1:1", Model: "m"}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"run/infer", "run/loop"} {
		fi, err := os.Stat(filepath.Join(state, d))
		if err != nil || fi.Mode().Perm() != 0o700 && fi.Mode().Perm() != 0o750 {
			t.Errorf("%s: %v, %v; want a 0700 (or, a user per role, 0750) directory", d, fi.Mode(), err)
		}
	}
	p := filepath.Join(state, "config", "loopd.toml")
	os.WriteFile(p, []byte("# the owner's\n"), 0o600)
	if err := MakeState(t.Context(), Options{State: state, Llama: "127.0.0.1:1", Model: "m"}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "# the owner's\n" {
		t.Error("layout rewrote an existing config")
	}
	if b, _ := os.ReadFile(filepath.Join(state, "config", "inferproxy.toml")); !strings.Contains(string(b), `upstream = "127.0.0.1:1"`) {
		t.Errorf("inferproxy.toml = %s", b)
	}
}

// TestUpFormat: bxctl up records this build's format in a state
// directory it makes, leaves an older one's as it is (format 0: none),
// and refuses a newer one without changing anything.
func TestUpFormat(t *testing.T) {
	state := filepath.Join(roletest.Dir(t), "state")
	if err := MakeState(t.Context(), Options{State: state, Llama: "127.0.0.1:1", Model: "m"}); err != nil {
		t.Fatal(err)
	}
	if n, err := layout.ReadFormat(state); n != layout.Format || err != nil {
		t.Errorf("a new state's format: %d, %v; want %d", n, err, layout.Format)
	}
	os.Remove(layout.FormatFile.In(state))
	if err := MakeState(t.Context(), Options{State: state, Llama: "127.0.0.1:1", Model: "m"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(layout.FormatFile.In(state)); !os.IsNotExist(err) {
		t.Errorf("bxctl up recorded a format in a state made before formats (only bxctl migrate does, after a backup): %v", err)
	}
	newer := filepath.Join(roletest.Dir(t), "newer")
	os.MkdirAll(newer, 0o700)
	os.WriteFile(layout.FormatFile.In(newer), []byte(layout.FormatText(layout.Format+1)), 0o644)
	err := MakeState(t.Context(), Options{State: newer, Llama: "127.0.0.1:1", Model: "m"})
	if err == nil || !strings.Contains(err.Error(), "#state-newer") {
		t.Errorf("a newer state: %v; want the state-newer refusal", err)
	}
	if ents, _ := os.ReadDir(newer); len(ents) != 1 {
		t.Errorf("bxctl up changed a newer state: %d entries", len(ents))
	}
}

// TestMakeStateIsTheTable: what `bxctl up` makes in a fresh state
// directory is exactly package layout's entries marked Up, each with its
// mode, plus one config per first config, and nothing else.
func TestMakeStateIsTheTable(t *testing.T) {
	state := filepath.Join(roletest.Dir(t), "state")
	if err := MakeState(t.Context(), Options{State: state, Llama: "127.0.0.1:1", Model: "m", ToolImage: "sha256:" + strings.Repeat("ab", 32)}); err != nil {
		t.Fatal(err)
	}
	users, err := layout.LoadUsers(state)
	if err != nil {
		t.Fatal(err)
	}
	if ps := layout.Verify(state, users); len(ps) != 0 {
		t.Errorf("bxctl up made a state directory the table does not describe: %v", ps)
	}
	// As root (a user per role) both owner_uid keys name the owner: no
	// grant or job file a role's uid wrote is believed.
	for _, role := range []string{"loopd", "brokerd"} {
		b, _ := os.ReadFile(layout.ConfigPath(state, role))
		has := strings.Contains(string(b), fmt.Sprintf("\nowner_uid = %d\n", users.Of(layout.Owner).UID))
		if has == users.Single() {
			t.Errorf("%s.toml (one user: %v) has owner_uid %v:\n%s", role, users.Single(), has, b)
		}
	}
	for _, e := range layout.Table {
		if _, err := os.Lstat(e.In(state)); e.Up && err != nil {
			t.Errorf("%s: bxctl up did not make it: %v", e.Path, err)
		}
	}
	entry := map[string]bool{}
	for _, e := range layout.Table {
		entry[e.Path] = true
	}
	filepath.WalkDir(state, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == state {
			return err
		}
		rel, _ := filepath.Rel(state, p)
		if !entry[filepath.ToSlash(rel)] {
			t.Errorf("%s: bxctl up made it, but it is no entry of package layout's table", rel)
		}
		return nil
	})
	// start writes each role's log there.
	if fi, err := os.Stat(layout.Logs.In(state)); err != nil || !fi.IsDir() {
		t.Errorf("no %s after bxctl up: %v", layout.Logs.Path, err)
	}
	// Every path a first config names is the table's.
	known := map[string]bool{state: true}
	for _, e := range layout.Table {
		known[e.In(state)] = true
		if e.Kind == layout.SocketDir {
			known[e.SocketIn(state)] = true
		}
	}
	quoted := regexp.MustCompile(`"(/[^"]*)"`)
	for _, c := range first.Configs {
		b, _ := os.ReadFile(c.Path(state))
		for _, m := range quoted.FindAllStringSubmatch(string(b), -1) {
			if !known[m[1]] {
				t.Errorf("%s.toml names %s, which is no path of the table", c.Role, m[1])
			}
			// and bxctl up made it, or the directory its socket goes in.
			if _, err := os.Stat(m[1]); err != nil && !strings.HasSuffix(m[1], ".sock") {
				t.Errorf("%s.toml names %s, which bxctl up did not make", c.Role, m[1])
			} else if _, err := os.Stat(filepath.Dir(m[1])); err != nil {
				t.Errorf("%s.toml names the socket %s, whose directory bxctl up did not make", c.Role, m[1])
			}
		}
	}
}

// TestLive: Live names the first role socket that answers on a state
// directory (bxctl up and bxctl migrate refuse to go on then), and none
// when nothing listens, a stale socket file included.
func TestLive(t *testing.T) {
	state := filepath.Join(roletest.Dir(t), "state")
	if s := Live(state); s != "" {
		t.Errorf("Live(no state) = %q", s)
	}
	sock := layout.Socket(state, &wire.Admin)
	if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if s := Live(state); s != sock {
		t.Errorf("Live(admin.sock listening) = %q, want %q", s, sock)
	}
	ln.Close()
	if _, err := os.Lstat(sock); err != nil {
		t.Fatalf("the stale socket file: %v", err)
	}
	if s := Live(state); s != "" {
		t.Errorf("Live(a stale socket file) = %q", s)
	}
}
