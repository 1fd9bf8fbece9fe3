package honchoconf

import (
	"strings"
	"testing"
	"time"

	"wntrmute.dev/boxmaker/pkg/host/config"
	"wntrmute.dev/boxmaker/pkg/text/dataclass"
)

const base = `
url = "https://honcho.example.ts.net:8000/"
key = "credential:honcho-key"
peer = "boxmaker-host1"
trusted_workspace = "host1-trusted"
untrusted_workspace = "host1-untrusted"
timeout_ms = 2500
[[workspaces]]
name = "host2-trusted"
trust = "trusted"
[[workspaces]]
name = "host2-untrusted"
`

func parse(t *testing.T, text string) (Settings, error) {
	t.Helper()
	var c Config
	if err := config.Decode([]byte(text), "memoryd.toml", &c); err != nil {
		return Settings{}, err
	}
	return Parse(c)
}

func TestParse(t *testing.T) {
	s, err := parse(t, base)
	if err != nil {
		t.Fatal(err)
	}
	if s.URL.String() != "https://honcho.example.ts.net:8000" || s.Key.String() != "credential:honcho-key" || s.Peer.String() != "boxmaker-host1" ||
		s.Trusted.String() != "host1-trusted" || s.Untrusted.String() != "host1-untrusted" || s.Timeout != 2500*time.Millisecond {
		t.Fatalf("Parse = %+v", s)
	}
	if len(s.Others) != 2 || !s.Others[0].Trusted || s.Others[1].Trusted {
		t.Fatalf("Others = %+v, want host2-trusted trusted and host2-untrusted untrusted by default", s.Others)
	}
	s, err = parse(t, strings.Replace(strings.Replace(base, "key = \"credential:honcho-key\"\n", "", 1), "timeout_ms = 2500\n", "", 1))
	if err != nil || s.HasKey() || s.Timeout != DefaultTimeout {
		t.Fatalf("no key, no timeout: %+v, %v", s, err)
	}
}

func TestParseRefuses(t *testing.T) {
	const jwt = "eyJhbGciOiJIUzI1NiJ9.eyJhZCI6dHJ1ZX0.c2lnbmF0dXJlc2lnbmF0dXJl"
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"no url", `url = "https://honcho.example.ts.net:8000/"`, ``, "url: is required"},
		{"plain http", `https://honcho.example.ts.net:8000/`, `http://honcho.example.com`, "clear text"},
		{"user info", `https://honcho.example.ts.net:8000/`, `https://u:p@honcho.example.com`, "user info"},
		{"query", `https://honcho.example.ts.net:8000/`, `https://honcho.example.com/?k=v`, "query"},
		{"v3", `https://honcho.example.ts.net:8000/`, `https://honcho.example.com/v3`, "/v3"},
		{"scheme", `https://honcho.example.ts.net:8000/`, `ftp://honcho.example.com`, "scheme"},
		{"no peer", `peer = "boxmaker-host1"`, ``, "peer is required"},
		{"bad peer", `"boxmaker-host1"`, `"boxmaker host1"`, "peer: parse honcho id"},
		{"same workspaces", `"host1-untrusted"`, `"host1-trusted"`, "must differ"},
		{"timeout low", `timeout_ms = 2500`, `timeout_ms = 5`, "timeout_ms is 5"},
		{"timeout high", `timeout_ms = 2500`, `timeout_ms = 999999`, "timeout_ms is 999999"},
		{"other twice", `"host2-untrusted"`, `"host2-trusted"`, "listed twice"},
		{"other is own", `"host2-untrusted"`, `"host1-untrusted"`, "one of this agent's own"},
		{"trust word", `trust = "trusted"`, `trust = "yes"`, `want "trusted" or "untrusted"`},
		{"unknown key", `timeout_ms = 2500`, `timeout = 2500`, "unknown key"},
		{"case", `timeout_ms = 2500`, `Timeout_ms = 2500`, "Timeout_ms"},
		{"speaker is peer", `timeout_ms = 2500`, `speaker_peer = "boxmaker-host1"`, "speaker_peer and peer must differ"},
		{"bad speaker", `timeout_ms = 2500`, `speaker_peer = "the owner"`, "speaker_peer: parse honcho id"},
		{"class word", `timeout_ms = 2500`, `max_class = "internal"`, `max_class is "internal"`},
		{"bound low", `timeout_ms = 2500`, `read_bound_ms = 1`, "read_bound_ms is 1"},
		{"bound high", `timeout_ms = 2500`, `read_bound_ms = 60000`, "read_bound_ms is 60000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, strings.Replace(base, tc.from, tc.to, 1))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse = %v, want %q", err, tc.want)
			}
			if strings.HasPrefix(err.Error(), "honcho:") && !strings.Contains(err.Error(), "see docs/runbook.md#honcho-config-refused") {
				t.Fatalf("refusal %q lacks its runbook anchor", err)
			}
		})
	}
	for _, key := range []string{jwt, "credential:" + jwt, "env:" + jwt, "Bearer " + jwt, "file:" + jwt, strings.Repeat("k", 80), "a.b.c"} {
		_, err := parse(t, strings.Replace(base, "credential:honcho-key", key, 1))
		if err == nil || !strings.Contains(err.Error(), "see docs/runbook.md#honcho-key-in-config") {
			t.Fatalf("key %q: Parse = %v, want the key-in-config refusal", key, err)
		}
		if strings.Contains(err.Error(), key) || strings.Contains(err.Error(), "eyJ") || strings.Contains(err.Error(), "kkkk") {
			t.Fatalf("refusal of a pasted key echoes it: %v", err)
		}
	}
	for _, u := range []string{"http://127.0.0.1:8000", "http://localhost:8000", "http://100.100.1.2:8000", "http://[fd7a:115c:a1e0::1]:8000", "http://honcho.tail1234.ts.net"} {
		if _, err := parse(t, strings.Replace(base, "https://honcho.example.ts.net:8000/", u, 1)); err != nil {
			t.Errorf("url %s: %v, want accepted", u, err)
		}
	}
}

// TestParseFleetKeys: the defaults, and max_class "secret" refused with
// its own entry (a secret turn never leaves the host).
func TestParseFleetKeys(t *testing.T) {
	s, err := parse(t, base)
	if err != nil || s.Speaker.String() != DefaultSpeaker || s.MaxClass != dataclass.Private || s.ReadBound != DefaultReadBound {
		t.Fatalf("defaults: %+v, %v", s, err)
	}
	s, err = parse(t, strings.Replace(base, "timeout_ms = 2500", "timeout_ms = 2500\nspeaker_peer = \"kyle\"\nmax_class = \"public\"\nread_bound_ms = 250", 1))
	if err != nil || s.Speaker.String() != "kyle" || s.MaxClass != dataclass.Public || s.ReadBound != 250*time.Millisecond {
		t.Fatalf("set: %+v, %v", s, err)
	}
	_, err = parse(t, strings.Replace(base, "timeout_ms = 2500", "max_class = \"secret\"", 1))
	if err == nil || !strings.Contains(err.Error(), "see docs/runbook.md#honcho-secret-class") {
		t.Fatalf("max_class secret: %v", err)
	}
}

func TestParseID(t *testing.T) {
	for _, ok := range []string{"a", "A-z_0-9", strings.Repeat("x", MaxIDLen), "mm_k3j9x8c7v6b5n4m3q2w1e0r9ty"} {
		if _, err := ParseID(ok); err != nil {
			t.Errorf("ParseID(%q) = %v, want ok", ok, err)
		}
	}
	for _, bad := range []string{"", strings.Repeat("x", MaxIDLen+1), "a b", "a/b", "a.b", "é", "a\x00", "../x", "a:b"} {
		if _, err := ParseID(bad); err == nil {
			t.Errorf("ParseID(%q) = nil, want an error", bad)
		}
	}
	if _, err := (ID{}).MarshalText(); err == nil {
		t.Error("the zero ID encoded")
	}
}
