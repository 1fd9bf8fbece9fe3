package install

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/imagearchive"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/units"
)

type dirInfo struct{ os.FileInfo }

func (dirInfo) IsDir() bool        { return true }
func (dirInfo) Name() string       { return "system" }
func (dirInfo) Size() int64        { return 0 }
func (dirInfo) Mode() os.FileMode  { return os.ModeDir | 0o755 }
func (dirInfo) ModTime() time.Time { return time.Time{} }
func (dirInfo) Sys() any           { return nil }

// goodHost is a host that can take the deployment.
func goodHost() Host {
	return Host{
		Euid:     func() int { return 0 },
		Stat:     func(string) (os.FileInfo, error) { return dirInfo{}, nil },
		FSType:   func(string) (int64, error) { return cgroup2Magic, nil },
		LookPath: func(s string) (string, error) { return "/usr/bin/" + s, nil },
		Output: func(argv ...string) ([]byte, error) {
			if strings.HasSuffix(argv[0], "podman") {
				return []byte("podman version 5.8.2\n"), nil
			}
			return []byte("systemd 252 (252.39-1~deb12u1)\n+PAM +AUDIT\n"), nil
		},
		Lstat:  func(string) (os.FileInfo, error) { return nil, os.ErrNotExist },
		Getent: getentOf("root:x:0:0::/root:/bin/sh\n", "root:x:0:\n"),
	}
}

// getentOf is getent over these passwd and group texts, as the name
// service would answer from them (by name or by id).
func getentOf(passwd, group string) func(db, key string) (string, bool, error) {
	return func(db, key string) (string, bool, error) {
		text := map[string]string{"passwd": passwd, "group": group}[db]
		for _, l := range strings.Split(text, "\n") {
			if f := strings.Split(l, ":"); len(f) >= 3 && (f[0] == key || f[2] == key) {
				return l, true, nil
			}
		}
		return "", false, nil
	}
}

func TestPreflight(t *testing.T) {
	if rs := Preflight(goodHost(), "/usr/local/bin/podman"); len(rs) != 0 {
		t.Fatalf("Preflight(good host) = %v", rs)
	}
	cases := []struct {
		name, anchor string
		plant        func(*Host)
	}{
		{"not root", "install-not-root", func(h *Host) { h.Euid = func() int { return 1000 } }},
		{"no systemd", "install-no-systemd", func(h *Host) {
			h.Stat = func(string) (os.FileInfo, error) { return nil, os.ErrNotExist }
		}},
		{"cgroup v1", "install-cgroup-v1", func(h *Host) { h.FSType = func(string) (int64, error) { return 0x01021994, nil } }},
		{"no systemd-creds", "install-no-systemd", func(h *Host) {
			h.LookPath = func(s string) (string, error) {
				if s == "systemd-creds" {
					return "", errors.New("not found")
				}
				return "/usr/bin/" + s, nil
			}
		}},
		{"old systemd", "install-no-creds", func(h *Host) {
			h.Output = func(argv ...string) ([]byte, error) {
				if strings.HasSuffix(argv[0], "podman") {
					return []byte("podman version 5.8.2\n"), nil
				}
				return []byte("systemd 247 (247.3-7)\n"), nil
			}
		}},
		{"old podman", "install-podman", func(h *Host) {
			h.Output = func(argv ...string) ([]byte, error) {
				if strings.HasSuffix(argv[0], "podman") {
					return []byte("podman version 4.3.1\n"), nil
				}
				return []byte("systemd 252\n"), nil
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := goodHost()
			c.plant(&h)
			rs := Preflight(h, "/usr/local/bin/podman")
			found := false
			for _, r := range rs {
				found = found || r.Pointer == "see docs/runbook.md#"+c.anchor
				if !strings.HasSuffix(r.Error(), r.Pointer) {
					t.Errorf("refusal %q lacks its runbook pointer", r.Error())
				}
			}
			if !found {
				t.Errorf("Preflight = %v, want a refusal %s", rs, c.anchor)
			}
		})
	}
}

func existing(passwd, group string) (map[string]bool, error) {
	h := goodHost()
	h.Getent = getentOf(passwd, group)
	return Existing(h)
}

func TestExisting(t *testing.T) {
	base := "root:x:0:0::/root:/bin/sh\n"
	have, err := existing(base+"boxmaker-loopd:x:61002:61002::/nonexistent:/usr/sbin/nologin\n", "root:x:0:\nboxmaker-loopd:x:61002:\n")
	if err != nil || !have["boxmaker-loopd"] || have["boxmaker-brokerd"] {
		t.Errorf("Existing = %v, %v", have, err)
	}
	for name, etc := range map[string][2]string{
		"name with another uid": {base + "boxmaker-loopd:x:1001:61002::/:/bin/false\n", "boxmaker-loopd:x:61002:\n"},
		"uid of another user":   {base + "alice:x:61004:61004::/home/alice:/bin/sh\n", ""},
		"gid of another group":  {base, "staff:x:61005:\n"},
		"user without group":    {base + "boxmaker-loopd:x:61002:61002::/:/bin/false\n", ""},
	} {
		if _, err := existing(etc[0], etc[1]); err == nil || !strings.Contains(err.Error(), "install-user-conflict") {
			t.Errorf("%s: Existing = %v, want install-user-conflict", name, err)
		}
	}
}

// TestExistingAsksTheNameService: a uid held only in LDAP or sssd (not
// in /etc/passwd) is found through getent and refused; a getent that
// fails is an error, not "free".
func TestExistingAsksTheNameService(t *testing.T) {
	h := goodHost()
	var asked []string
	h.Getent = func(db, key string) (string, bool, error) {
		asked = append(asked, db+" "+key)
		if db == "passwd" && key == "61003" {
			return "jdoe:*:61003:500:J Doe:/home/jdoe:/bin/bash", true, nil
		}
		return "", false, nil
	}
	if _, err := Existing(h); err == nil || !strings.Contains(err.Error(), "is jdoe's") || !strings.Contains(err.Error(), "install-user-conflict") {
		t.Errorf("Existing = %v, want jdoe's uid refused", err)
	}
	if !slices.Contains(asked, "group 61005") || !slices.Contains(asked, "passwd boxmaker-gatewayd") {
		t.Errorf("Existing asked only %q", asked)
	}
	h.Getent = func(string, string) (string, bool, error) { return "", false, errors.New("exit status 1") }
	if _, err := Existing(h); err == nil {
		t.Error("Existing took a failing getent for no entry")
	}
}

func images() Images {
	im := Images{}
	for i, r := range append(append([]string{}, layout.Daemons...), units.Tool) {
		im[r] = &imagearchive.Archive{ID: "sha256:" + strings.Repeat(string(rune('a'+i)), 64)}
	}
	return im
}

func options() Options {
	return Options{State: "/var/lib/boxmaker", Podman: "/usr/local/bin/podman", Llama: "100.64.0.7:8080",
		MattermostNet: "100.64.0.8 10.0.0.53", UnitDir: "/etc/systemd/system", ImageRoot: "/usr/local/lib/boxmaker/images", CredDir: "/etc/boxmaker/credentials"}
}

// TestUnitFilesHaveNoPlaceholderLeft: every unit written has every value
// substituted, and the addresses are the flags'.
func TestUnitFilesHaveNoPlaceholderLeft(t *testing.T) {
	v, err := Values(options(), images())
	if err != nil {
		t.Fatal(err)
	}
	files, order, err := UnitFiles(v, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(order) != len(layout.Daemons) {
		t.Errorf("units %v", order)
	}
	for name, text := range files {
		if ps, err := units.Placeholders(text); len(ps) > 0 || err != nil || strings.Contains(text, "@state@") {
			t.Errorf("%s keeps a placeholder:\n%s", name, text)
		}
	}
	for want, unit := range map[string]string{
		"IPAddressAllow=100.64.0.7\n":           "boxmaker-inferproxy.service",
		"IPAddressAllow=100.64.0.8 10.0.0.53\n": "boxmaker-gatewayd.service",
		"LoadCredentialEncrypted=mattermost-token:/etc/boxmaker/credentials/mattermost-token.cred": "boxmaker-gatewayd.service",
		"RootDirectory=/usr/local/lib/boxmaker/images/" + strings.Repeat("d", 64) + "\n":           "boxmaker-loopd.service",
		"ExecStart=/usr/local/lib/boxmaker/images/" + strings.Repeat("c", 64) + "/bin/brokerd ":    "boxmaker-brokerd.service",
	} {
		if !strings.Contains(files[unit], want) {
			t.Errorf("%s lacks %q:\n%s", unit, want, files[unit])
		}
	}
	if files, _, _ := UnitFiles(v, false); files["boxmaker-gatewayd.service"] != "" {
		t.Error("gatewayd's unit is written without its config")
	}
}

func TestValuesRefuse(t *testing.T) {
	for name, edit := range map[string]func(*Options){
		"llama by name":           func(o *Options) { o.Llama = "llama.ts.net:8080" },
		"llama without port":      func(o *Options) { o.Llama = "100.64.0.7" },
		"llama port not a number": func(o *Options) { o.Llama = "100.64.0.7:8080\nExecStartPre=/bin/sh" },
		"llama port zero":         func(o *Options) { o.Llama = "100.64.0.7:0" },
		"llama with a zone":       func(o *Options) { o.Llama = "[fe80::1%eth0]:8080" },
		"mattermost not an ip":    func(o *Options) { o.MattermostNet = "chat.example.com" },
		"a newline":               func(o *Options) { o.HonchoNet = "10.0.0.1\nExecStartPre=/bin/sh" },
	} {
		o := options()
		edit(&o)
		v, err := Values(o, images())
		if err == nil {
			_, _, err = UnitFiles(v, true)
		}
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
