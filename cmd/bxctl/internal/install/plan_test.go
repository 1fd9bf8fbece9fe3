package install

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/checks/roletest"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/ownership"
	firstconf "wntrmute.dev/boxmaker/pkg/host/roleconf/first"
	"wntrmute.dev/boxmaker/pkg/host/units"
)

// fixture is a host in a directory: every path install writes is under
// root, and every program it runs is a stand-in on PATH that appends
// its argv to log (outside root).
type fixture struct {
	o       Options
	h       Host
	root    string
	log     string
	secrets map[string][]byte
}

func newFixture(t *testing.T) *fixture {
	root, side := t.TempDir(), t.TempDir()
	// The role users must pass every directory above the state one.
	if err := os.Chmod(filepath.Dir(root), 0o711); err != nil {
		t.Fatal(err)
	}
	f := &fixture{root: root, log: filepath.Join(side, "argv"), h: goodHost()}
	bin := filepath.Join(side, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tool := range append(slices.Clone(tools), "podman") {
		script := "#!/bin/sh\necho \"$0 $*\" >> " + f.log + "\n"
		if err := os.WriteFile(filepath.Join(bin, tool), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	images, _ := imageDir(t)
	for _, d := range []string{"etc", "units", "state"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(root, "etc", "subuid"), []byte("alice:100000:65536\n"), 0o644)
	os.WriteFile(filepath.Join(root, "etc", "subgid"), []byte("alice:100000:65536\n"), 0o644)
	gw := filepath.Join(side, "gatewayd.toml")
	if err := os.WriteFile(gw, []byte(gatewayText), 0o600); err != nil {
		t.Fatal(err)
	}
	f.o = Options{Images: images, State: filepath.Join(root, "state"), Podman: filepath.Join(bin, "podman"),
		Llama: "100.64.0.7:8080", MattermostNet: "100.64.0.8 100.100.100.100", GatewayConfig: gw, Start: true,
		UnitDir: filepath.Join(root, "units"), ImageRoot: filepath.Join(root, "images"), CredDir: filepath.Join(root, "credentials"),
		Etc: filepath.Join(root, "etc"), Owners: ownership.Self()}
	f.secrets = map[string][]byte{units.MattermostToken: []byte("tok-canary")}
	return f
}

// snapshot is every path under root with its mode and content's sum.
func snapshot(t *testing.T, root string) map[string]string {
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		sum := ""
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum = fmt.Sprintf("%x", sha256.Sum256(b))
		}
		out[p] = fmt.Sprintf("%v %s", fi.Mode(), sum)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRefusedInstallChangesNothing: every refusal that can be decided
// before a change is decided before the first one: a refused install
// runs no program (no user, no linger, no podman.socket) and leaves
// every file as it was; the refusals come together.
func TestRefusedInstallChangesNothing(t *testing.T) {
	roletest.Passable(t)
	if _, err := prepare(newFixture(t).o, goodHost(), newFixture(t).secrets); err != nil {
		t.Fatalf("prepare(good host) = %v", err)
	}
	home := brokerdUser(t).Home
	aFile, err := os.Lstat("/etc/hostname")
	if err != nil {
		aFile, _ = os.Lstat(os.Args[0])
	}
	for _, c := range []struct {
		name    string
		anchors []string
		plant   func(t *testing.T, f *fixture)
	}{
		{"a subordinate range overlapping brokerd's", []string{"install-subid-overlap"}, func(t *testing.T, f *fixture) {
			os.WriteFile(filepath.Join(f.o.Etc, "subuid"), []byte("alice:100000:65536\nbob:165536:65536\n"), 0o644)
		}},
		{"brokerd's home taken", []string{"install-user-conflict"}, func(t *testing.T, f *fixture) {
			f.h.Lstat = func(p string) (os.FileInfo, error) {
				if p == home {
					return aFile, nil
				}
				return nil, os.ErrNotExist
			}
		}},
		{"a uid taken in the name service", []string{"install-user-conflict"}, func(t *testing.T, f *fixture) {
			f.h.Getent = getentOf("jdoe:*:61002:500::/home/jdoe:/bin/sh\n", "")
		}},
		{"users.toml with other ids", []string{"install-users-differ"}, func(t *testing.T, f *fixture) {
			os.MkdirAll(layout.Config.In(f.o.State), 0o700)
			os.WriteFile(layout.UsersFile.In(f.o.State), []byte("[gatewayd]\nuid = 1\n"), 0o644)
		}},
		{"a state of a newer format", []string{"state-newer"}, func(t *testing.T, f *fixture) {
			os.MkdirAll(f.o.State, 0o700)
			os.WriteFile(layout.FormatFile.In(f.o.State), []byte(layout.FormatText(layout.Format+1)), 0o644)
		}},
		{"the token only in a comment", []string{"install-token"}, func(t *testing.T, f *fixture) {
			os.WriteFile(f.o.GatewayConfig, []byte("# token = \"credential:mattermost-token\"\ntoken = \"tok-canary\"\n"), 0o600)
		}},
		{"another gatewayd.toml installed", []string{"install-gateway-config-differs"}, func(t *testing.T, f *fixture) {
			os.MkdirAll(layout.Config.In(f.o.State), 0o700)
			os.WriteFile(layout.ConfigPath(f.o.State, layout.Gatewayd), []byte(strings.Replace(gatewayText, "[\"u1\"]", "[\"u1\", \"u2\"]", 1)), 0o600)
		}},
		{"brokerd.toml's tool image not on a line of its own", []string{"install-config-key"}, func(t *testing.T, f *fixture) {
			os.MkdirAll(layout.Config.In(f.o.State), 0o700)
			os.WriteFile(layout.ConfigPath(f.o.State, layout.Brokerd), []byte("runner = { tool_image = \"sha256:x\" }\n"), 0o600)
		}},
		{"--state with a newline", []string{"install-path"}, func(t *testing.T, f *fixture) {
			f.o.State += "\nExecStartPre=/bin/sh"
		}},
		{"a state directory the role users cannot reach", []string{"layout-unreachable"}, func(t *testing.T, f *fixture) {
			os.Chmod(f.root, 0o700)
		}},
		{"a state directory without its parent", []string{"install-path"}, func(t *testing.T, f *fixture) {
			f.o.State = filepath.Join(f.root, "var", "lib", "boxmaker")
		}},
		{"--mattermost-net the whole Internet", []string{"install-network-wide"}, func(t *testing.T, f *fixture) {
			f.o.MattermostNet = "0.0.0.0/0"
		}},
		{"an image not the one built", []string{"install-image-pin"}, func(t *testing.T, f *fixture) {
			b, _ := archiveOf(t, "memoryd")
			os.WriteFile(filepath.Join(f.o.Images, "loopd.tar"), b, 0o644)
		}},
		{"the images writable by others", []string{"install-input-unsafe"}, func(t *testing.T, f *fixture) {
			os.Chmod(f.o.Images, 0o777)
		}},
		{"two at once", []string{"install-subid-overlap", "install-token"}, func(t *testing.T, f *fixture) {
			os.WriteFile(filepath.Join(f.o.Etc, "subgid"), []byte("carol:231072:65536\n"), 0o644)
			f.secrets = nil
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			c.plant(t, f)
			before := snapshot(t, f.root)
			err := Run(context.Background(), f.o, f.h, f.secrets, io.Discard)
			for _, a := range c.anchors {
				if err == nil || !strings.Contains(err.Error(), "see docs/runbook.md#"+a) {
					t.Errorf("Run = %v, want a refusal %s", err, a)
				}
			}
			if err != nil && strings.Contains(err.Error(), "tok-canary") {
				t.Errorf("the refusal quotes the token: %v", err)
			}
			if b, _ := os.ReadFile(f.log); len(b) > 0 {
				t.Errorf("a refused install ran:\n%s", b)
			}
			after := snapshot(t, f.root)
			for p, v := range after {
				if before[p] != v {
					t.Errorf("a refused install changed %s (%q, was %q)", p, v, before[p])
				}
			}
			for p := range before {
				if _, ok := after[p]; !ok {
					t.Errorf("a refused install removed %s", p)
				}
			}
		})
	}
}

// installed writes what a first install would have: the units, each
// first config (with the old tool image and upstream) and gatewayd.toml.
func installed(t *testing.T, f *fixture, p *plan, params firstconf.Params) {
	for name, text := range p.files {
		if err := os.WriteFile(filepath.Join(f.o.UnitDir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(layout.Config.In(f.o.State), 0o700)
	for _, c := range firstconf.Configs {
		if err := os.WriteFile(c.Path(f.o.State), []byte(c.Text(params)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(layout.ConfigPath(f.o.State, layout.Gatewayd), p.gateway, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRunAgain: over an earlier install, a changed gatewayd.toml is
// refused with its difference unless --replace-gateway-config; the tool
// image and the upstream follow this install's inputs in the owner's
// files; a unit whose file, config or credential changed is restarted,
// and one with none changed is not.
func TestRunAgain(t *testing.T) {
	roletest.Passable(t)
	f := newFixture(t)
	first, err := prepare(f.o, f.h, f.secrets)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.restart) != len(first.order) {
		t.Errorf("a first install restarts %q, want every unit %q", first.restart, first.order)
	}
	params := firstconf.Params{State: f.o.State, Llama: "100.64.0.9:8080", Model: "m", ToolImage: "sha256:" + strings.Repeat("0", 64), PodmanSocket: units.PodmanSocket()}
	installed(t, f, first, params)
	p, err := prepare(f.o, f.h, f.secrets)
	if err != nil {
		t.Fatal(err)
	}
	broker, infer := layout.ConfigPath(f.o.State, layout.Brokerd), layout.ConfigPath(f.o.State, layout.Inferproxy)
	if !strings.Contains(string(p.writes[broker]), fmt.Sprintf("tool_image = %q\n", p.im[units.Tool].ID)) {
		t.Errorf("brokerd.toml keeps the old tool image:\n%s", p.writes[broker])
	}
	if !strings.Contains(string(p.writes[infer]), "upstream = \"100.64.0.7:8080\"\n") {
		t.Errorf("inferproxy.toml keeps the old upstream:\n%s", p.writes[infer])
	}
	want := []string{units.UnitName(layout.Gatewayd), units.UnitName(layout.Inferproxy), units.UnitName(layout.Brokerd)}
	for _, u := range p.order {
		if slices.Contains(p.restart, u) != slices.Contains(want, u) {
			t.Errorf("restart %q, want %q (gatewayd for its token, brokerd and inferproxy for their configs)", p.restart, want)
			break
		}
	}

	// Nothing changed but the token: only gatewayd restarts.
	installed(t, f, first, firstconf.Params{State: f.o.State, Llama: f.o.Llama, ToolImage: p.im[units.Tool].ID, PodmanSocket: units.PodmanSocket()})
	if p, err = prepare(f.o, f.h, f.secrets); err != nil || len(p.writes) != 0 || !slices.Equal(p.restart, []string{units.UnitName(layout.Gatewayd)}) {
		t.Errorf("prepare(no change) = writes %d, restart %q, %v", len(p.writes), p.restart, err)
	}

	// A unit file another image would change restarts that unit.
	loopd := filepath.Join(f.o.UnitDir, units.UnitName(layout.Loopd))
	os.WriteFile(loopd, []byte(strings.Replace(first.files[units.UnitName(layout.Loopd)], "RootDirectory=", "RootDirectory=/old", 1)), 0o644)
	if p, err = prepare(f.o, f.h, f.secrets); err != nil || !slices.Contains(p.restart, units.UnitName(layout.Loopd)) {
		t.Errorf("prepare(loopd's unit changed) restarts %q, %v", p.restart, err)
	}

	// The owner's allowlist edit: refused with the difference, then
	// installed with --replace-gateway-config.
	edited := strings.Replace(gatewayText, "[\"u1\"]", "[\"u1\", \"u2\"]", 1)
	os.WriteFile(layout.ConfigPath(f.o.State, layout.Gatewayd), []byte(edited), 0o600)
	_, err = prepare(f.o, f.h, f.secrets)
	if err == nil || !strings.Contains(err.Error(), "install-gateway-config-differs") || !strings.Contains(err.Error(), "  - users = [\"u1\", \"u2\"]") {
		t.Errorf("prepare(gatewayd.toml differs) = %v", err)
	}
	f.o.ReplaceGatewayConfig = true
	p, err = prepare(f.o, f.h, f.secrets)
	if err != nil || string(p.writes[layout.ConfigPath(f.o.State, layout.Gatewayd)]) != gatewayText || !slices.Contains(p.restart, units.UnitName(layout.Gatewayd)) {
		t.Errorf("prepare(--replace-gateway-config) = %v", err)
	}
}

// TestMakeStateWritesThePlan: the state step writes what prepare
// decided: the installer's keys set in the owner's brokerd.toml, the rest
// of it as the owner wrote it, and gatewayd.toml replaced when asked.
func TestMakeStateWritesThePlan(t *testing.T) {
	if os.Geteuid() != 0 && os.Getenv("CI") == "" {
		// The layout's owners and modes are root's to give (CI runs as
		// root); the Nix sandbox's build user is uid 1000, alone.
		t.Skip("did not run: needs root")
	}
	f := newFixture(t)
	first, err := prepare(f.o, f.h, f.secrets)
	if err != nil {
		t.Fatal(err)
	}
	installed(t, f, first, firstconf.Params{State: f.o.State, Llama: "100.64.0.9:8080", ToolImage: "sha256:" + strings.Repeat("0", 64), PodmanSocket: units.PodmanSocket()})
	broker := layout.ConfigPath(f.o.State, layout.Brokerd)
	mine, _ := os.ReadFile(broker)
	mine = append(mine, []byte("# the owner's own note\nmemory_mb = 1024\n")...)
	os.WriteFile(broker, mine, 0o600)
	os.WriteFile(layout.ConfigPath(f.o.State, layout.Gatewayd), []byte(gatewayText+"# old\n"), 0o600)
	f.o.ReplaceGatewayConfig = true
	p, err := prepare(f.o, f.h, f.secrets)
	if err != nil {
		t.Fatal(err)
	}
	if err := makeState(f.o, p); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(broker)
	want := strings.Replace(string(mine), "sha256:"+strings.Repeat("0", 64), p.im[units.Tool].ID, 1)
	if string(got) != want {
		t.Errorf("brokerd.toml after the install:\n%s\nwant:\n%s", got, want)
	}
	if b, _ := os.ReadFile(layout.ConfigPath(f.o.State, layout.Gatewayd)); string(b) != gatewayText {
		t.Errorf("gatewayd.toml after --replace-gateway-config:\n%s", b)
	}
}

// TestStartRestartsWhatChanged: systemd reloads, the changed units are
// try-restarted (only those running restart) before enable --now starts
// the rest; with --no-start they are listed, not restarted.
func TestStartRestartsWhatChanged(t *testing.T) {
	f := newFixture(t)
	p := &plan{order: []string{"a.service", "b.service"}, restart: []string{"b.service"}}
	if err := start(runner{context.Background(), io.Discard}, f.o, p, io.Discard); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(f.log)
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		_, args, _ := strings.Cut(l, " ")
		got = append(got, filepath.Base(strings.Fields(l)[0])+" "+args)
	}
	want := []string{"systemctl daemon-reload", "systemctl try-restart b.service", "systemctl enable --now a.service", "systemctl enable --now b.service"}
	if !slices.Equal(got, want) {
		t.Errorf("start ran %q, want %q", got, want)
	}
	os.Remove(f.log)
	f.o.Start = false
	var out strings.Builder
	if err := start(runner{context.Background(), io.Discard}, f.o, p, &out); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(f.log); strings.Contains(string(b), "try-restart") || !strings.Contains(out.String(), "not restarted (--no-start): b.service") {
		t.Errorf("start --no-start ran %q, said %q", b, out.String())
	}
}
