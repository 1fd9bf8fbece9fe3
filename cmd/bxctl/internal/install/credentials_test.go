package install

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/units"
)

// TestStdinFlagsAreTheCredentials: every credential of the table comes
// through one stdin flag, in the table's order (the lines' order).
func TestStdinFlagsAreTheCredentials(t *testing.T) {
	if len(StdinFlags) != len(units.Credentials) {
		t.Fatalf("%d stdin flags for %d credentials", len(StdinFlags), len(units.Credentials))
	}
	for i, c := range units.Credentials {
		if s := StdinFlags[i]; s.Credential != c.Name || !strings.HasSuffix(s.Flag, "-stdin") || s.Missing == "" || s.Anchor == "" {
			t.Errorf("stdin flag %d = %+v, want credential %s", i, s, c.Name)
		}
	}
}

func TestReadSecrets(t *testing.T) {
	both := []string{units.HonchoKey, units.MattermostToken} // any order: the lines follow the table's
	for _, c := range []struct {
		name, in string
		names    []string
		want     map[string]string
	}{
		{"token alone", "tok-1\n", []string{units.MattermostToken}, map[string]string{units.MattermostToken: "tok-1"}},
		{"token without newline", "tok-1", []string{units.MattermostToken}, map[string]string{units.MattermostToken: "tok-1"}},
		{"token with CRLF", "tok-1\r\n", []string{units.MattermostToken}, map[string]string{units.MattermostToken: "tok-1"}},
		{"key alone", "eyJkey\n", []string{units.HonchoKey}, map[string]string{units.HonchoKey: "eyJkey"}},
		{"both", "tok-1\neyJkey\n", both, map[string]string{units.MattermostToken: "tok-1", units.HonchoKey: "eyJkey"}},
		{"none", "ignored", nil, map[string]string{}},
	} {
		got, err := ReadSecrets(strings.NewReader(c.in), c.names)
		if err != nil || len(got) != len(c.want) {
			t.Errorf("%s: ReadSecrets = %q, %v, want %q", c.name, got, err, c.want)
			continue
		}
		for k, v := range c.want {
			if string(got[k]) != v {
				t.Errorf("%s: %s = %q, want %q", c.name, k, got[k], v)
			}
		}
	}
	for _, c := range []struct {
		name, in string
		names    []string
	}{
		{"one line for two", "tok-secret-1\n", both},
		{"three lines for two", "tok-secret-1\neyJsecret\nextra-secret\n", both},
		{"two lines for one", "tok-secret-1\neyJsecret\n", []string{units.MattermostToken}},
		{"empty", "", []string{units.MattermostToken}},
		{"empty line", "\neyJsecret\n", both},
		{"blank line", "tok-secret-1\n  \n", both},
		{"too long", strings.Repeat("x", MaxToken+1) + "\n", []string{units.HonchoKey}},
		{"too much", strings.Repeat("x", 3*MaxToken), []string{units.HonchoKey}},
	} {
		_, err := ReadSecrets(strings.NewReader(c.in), c.names)
		if err == nil || !strings.HasSuffix(err.Error(), "see docs/runbook.md#install-credential-stdin") {
			t.Errorf("%s: ReadSecrets = %v, want an install-credential-stdin refusal", c.name, err)
			continue
		}
		if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "xxxx") {
			t.Errorf("%s: the refusal quotes the plaintext: %v", c.name, err)
		}
	}
	if _, err := ReadSecrets(strings.NewReader("x\n"), []string{"honcho"}); err == nil {
		t.Error("ReadSecrets took a name that is no credential")
	}
}

// state is a state directory whose memoryd.toml is text ("" for none).
func state(t *testing.T, text string) Options {
	o := options()
	o.State = t.TempDir()
	if text != "" {
		p := layout.ConfigPath(o.State, layout.Memoryd)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

// memBase is a memoryd.toml memoryd's loader takes, without [honcho]
// (every path is the layout table's: no key names one).
const memBase = "index_max_class = \"private\"\n"

const honchoTable = memBase + "[honcho]\nurl = \"https://honcho.example.ts.net\"\npeer = \"agent\"\ntrusted_workspace = \"host1-trusted\"\nuntrusted_workspace = \"host1-untrusted\"\n"

// TestNeeded: the token exactly with gatewayd, Honcho's key exactly when
// memoryd's config names its credential; anything else is refused
// before anything is changed, with the credential's runbook entry.
func TestNeeded(t *testing.T) {
	tok := map[string][]byte{units.MattermostToken: []byte("tok")}
	key := map[string][]byte{units.HonchoKey: []byte("eyJkey")}
	both := map[string][]byte{units.MattermostToken: []byte("tok"), units.HonchoKey: []byte("eyJkey")}
	withKey := honchoTable + "key = \"credential:honcho-key\"\n"
	for _, c := range []struct {
		name, config, gateway string
		secrets               map[string][]byte
		want                  []string // the optional credentials given, or nil
		refusal               string   // the anchor, or ""
	}{
		{"nothing", "", "", nil, nil, ""},
		{"gatewayd with its token", "", "/root/gatewayd.toml", tok, nil, ""},
		{"gatewayd without a token", "", "/root/gatewayd.toml", nil, nil, "install-token"},
		{"a token without gatewayd", "", "", tok, nil, "install-token"},
		{"honcho off", memBase, "", nil, nil, ""},
		{"honcho off with a key", memBase, "", key, nil, "install-honcho-key"},
		{"no config with a key", "", "", key, nil, "install-honcho-key"},
		{"honcho with its auth off", honchoTable, "", nil, nil, ""},
		{"honcho with its auth off and a key", honchoTable, "", key, nil, "install-honcho-key"},
		{"honcho with its key", withKey, "", key, []string{units.HonchoKey}, ""},
		{"honcho and gatewayd", withKey, "/root/gatewayd.toml", both, []string{units.HonchoKey}, ""},
		{"honcho without its key", withKey, "", nil, nil, "install-honcho-key"},
		{"honcho without its key, gatewayd with", withKey, "/root/gatewayd.toml", tok, nil, "install-honcho-key"},
		{"key in a file", honchoTable + "key = \"file:/etc/honcho.key\"\n", "", key, nil, "install-honcho-key"},
		{"key in the environment", honchoTable + "key = \"env:HONCHO_KEY\"\n", "", key, nil, "install-honcho-key"},
		{"another credential", honchoTable + "key = \"credential:mattermost-token\"\n", "", key, nil, "install-honcho-key"},
		{"unparseable", "[honcho\nkey = 1\n", "", key, nil, "install-honcho-key"},
	} {
		o := state(t, c.config)
		o.GatewayConfig = c.gateway
		got, err := Needed(o, c.secrets)
		switch {
		case c.refusal == "" && (err != nil || !slices.Equal(got, c.want)):
			t.Errorf("%s: Needed = %q, %v, want %q", c.name, got, err, c.want)
		case c.refusal != "" && (err == nil || !strings.Contains(err.Error(), "see docs/runbook.md#"+c.refusal)):
			t.Errorf("%s: Needed = %q, %v, want a refusal %s", c.name, got, err, c.refusal)
		case err != nil && strings.Contains(err.Error(), "eyJkey"):
			t.Errorf("%s: the refusal quotes the key: %v", c.name, err)
		}
	}
}

// TestMemorydUnitLoadsTheKeyOnlyWhenGiven: the unit written loads
// Honcho's key from the file encrypt writes, and only when it is given.
func TestMemorydUnitLoadsTheKeyOnlyWhenGiven(t *testing.T) {
	v, err := Values(options(), images())
	if err != nil {
		t.Fatal(err)
	}
	line := "LoadCredentialEncrypted=honcho-key:/etc/boxmaker/credentials/honcho-key.cred\n"
	without, _, err := UnitFiles(v, true)
	if err != nil {
		t.Fatal(err)
	}
	with, _, err := UnitFiles(v, true, units.HonchoKey)
	if err != nil {
		t.Fatal(err)
	}
	m := units.UnitName(layout.Memoryd)
	if strings.Contains(without[m], "LoadCredentialEncrypted") || !strings.Contains(with[m], line) {
		t.Errorf("memoryd's unit without the key:\n%s\nwith it:\n%s", without[m], with[m])
	}
	for name, text := range with {
		if name != m && text != without[name] {
			t.Errorf("%s changes with Honcho's key", name)
		}
	}
}

// TestEncryptOnStdinOnly: each credential given is handed to
// systemd-creds on its stdin (a stand-in on PATH records its arguments
// and writes what it read), never in an argument, into a 0600 file in a
// 0700 directory; a credential not given is not written.
func TestEncryptOnStdinOnly(t *testing.T) {
	bin := t.TempDir()
	log := filepath.Join(bin, "argv")
	script := "#!/bin/sh\necho \"$@\" >> " + log + "\ncat > \"$4\"\n"
	if err := os.WriteFile(filepath.Join(bin, "systemd-creds"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	o := options()
	o.CredDir = filepath.Join(t.TempDir(), "credentials")
	key := "eyJhbGciOiJIUzI1NiJ9.canary-" + filepath.Base(bin)
	if err := encrypt(runner{context.Background(), io.Discard}, o, map[string][]byte{units.HonchoKey: []byte(key + "\n")}); err != nil {
		t.Fatal(err)
	}
	argv, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(o.CredDir, "honcho-key.cred")
	if want := "encrypt --name=honcho-key - " + p + "\n"; string(argv) != want {
		t.Errorf("systemd-creds ran with %q, want %q", argv, want)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != key {
		t.Errorf("systemd-creds read %q (%v) on stdin, want the key without its newline", b, err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v %v, want 0600", p, fi.Mode(), err)
	}
	if fi, err := os.Stat(o.CredDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: %v %v, want 0700", o.CredDir, fi.Mode(), err)
	}
	if _, err := os.Stat(filepath.Join(o.CredDir, "mattermost-token.cred")); err == nil {
		t.Error("the token's credential was written without a token")
	}
}
