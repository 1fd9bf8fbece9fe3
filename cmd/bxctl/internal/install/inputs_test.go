package install

import (
	"strings"
	"testing"
)

// TestCheckPaths: a path flag goes into the units' text only when it is
// absolute, clean and of letters, digits and /._-+.
func TestCheckPaths(t *testing.T) {
	if errs := checkPaths(options()); len(errs) != 0 {
		t.Fatalf("checkPaths(good) = %v", errs)
	}
	for name, edit := range map[string]func(*Options){
		"state with a newline":          func(o *Options) { o.State = "/var/lib/boxmaker\nExecStartPre=/bin/sh" },
		"state with a space":            func(o *Options) { o.State = "/var/lib/box maker" },
		"state relative":                func(o *Options) { o.State = "var/lib/boxmaker" },
		"state not clean":               func(o *Options) { o.State = "/var/lib/../lib/boxmaker" },
		"state with a specifier":        func(o *Options) { o.State = "/var/lib/%h" },
		"podman with a tab":             func(o *Options) { o.Podman = "/usr/bin/podman\t--remote" },
		"podman with a quote":           func(o *Options) { o.Podman = `/usr/bin/"podman"` },
		"podman with a control":         func(o *Options) { o.Podman = "/usr/bin/pod\x1bman" },
		"podman with a %":               func(o *Options) { o.Podman = "/usr/bin/podman%n" },
		"image root with ;":             func(o *Options) { o.ImageRoot = "/usr/local/lib/x;y" },
		"credential dir trailing slash": func(o *Options) { o.CredDir = "/etc/boxmaker/credentials/" },
	} {
		o := options()
		edit(&o)
		errs := checkPaths(o)
		if len(errs) != 1 || !strings.HasSuffix(errs[0].Error(), "see docs/runbook.md#install-path") {
			t.Errorf("%s: checkPaths = %v, want one install-path", name, errs)
		}
	}
}

// TestCheckNet: an address or a prefix of at least /8 (IPv4) or /32
// (IPv6); the whole address space and the unspecified address are not.
func TestCheckNet(t *testing.T) {
	for _, a := range []string{"100.64.0.8", "10.0.0.0/8", "100.64.0.0/10", "fd7a:115c:a1e0::/48", "2001:db8::1", "::ffff:10.0.0.1"} {
		if err := checkNet("--mattermost-net", a); err != nil {
			t.Errorf("checkNet(%q) = %v", a, err)
		}
	}
	for a, anchor := range map[string]string{
		"0.0.0.0/0": "install-network-wide", "::/0": "install-network-wide", "128.0.0.0/1": "install-network-wide",
		"10.0.0.0/7": "install-network-wide", "2000::/3": "install-network-wide", "::ffff:0:0/96": "install-network-wide",
		"0.0.0.0": "install-network-wide", "::": "install-network-wide",
		"chat.example.com": "install-network", "fe80::1%eth0": "install-network", "any": "install-network",
	} {
		if err := checkNet("--mattermost-net", a); err == nil || !strings.HasSuffix(err.Error(), "see docs/runbook.md#"+anchor) {
			t.Errorf("checkNet(%q) = %v, want %s", a, err, anchor)
		}
	}
	o := options()
	o.Llama = "0.0.0.0:8080"
	if _, err := checkNetworks(o); err == nil || !strings.Contains(err.Error(), "install-network-wide") {
		t.Errorf("checkNetworks(--llama 0.0.0.0:8080) = %v", err)
	}
}
