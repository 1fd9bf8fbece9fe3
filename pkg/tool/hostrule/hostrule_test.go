package hostrule

import (
	"strings"
	"testing"
)

func TestParseNameAccepts(t *testing.T) {
	for _, s := range []string{
		"example.com", "www.example.com", "a.b", "x1.io", "docs.python.org",
		"xn--bcher-kva.example", "a-b.c-d.org", "1.example.com", "123.com",
		strings.Repeat("a", 63) + ".com",
		strings.Repeat("a.", 125) + "com", // 253 characters
	} {
		n, err := ParseName(s)
		if err != nil || n.String() != s {
			t.Errorf("ParseName(%q) = %q, %v; want it back", s, n, err)
		}
	}
}

func TestParseNameRefuses(t *testing.T) {
	tests := []struct{ in, want string }{
		// IP literals, in every spelling the resolver would accept.
		{"127.0.0.1", "IP address"},
		{"127.1", "IP address"},
		{"0x7f.1", "does not start with a letter"},
		{"0x7f.0x1", "does not start with a letter"},
		{"0177.0.0.1", "does not start with a letter"},
		{"2130706433", "single-label"},
		{"::1", "IP address"},
		{"[::1]", "IP address"},
		{"::ffff:127.0.0.1", "IP address"},
		{"fe80::1%eth0", "IP address"},
		{"1.2.3.4.5", "does not start with a letter"},
		{"example.123", "does not start with a letter"},
		{"example.-com", "starts or ends with '-'"},
		// Not DNS names.
		{"", "empty"},
		{"localhost", "single-label"},
		{"straylight", "single-label"},
		{"Example.com", "lowercase"},
		{"example.com.", "trailing dot"},
		{".example.com", "empty label"},
		{"a..com", "empty label"},
		{"*.example.com", "wildcards"},
		{"ex_ample.com", "not allowed"},
		{"exa mple.com", "not allowed"},
		{"bücher.example", "not allowed"},
		{"example.com/x", "not a URL"},
		{"user@example.com", "not allowed"},
		{"-a.com", "starts or ends with '-'"},
		{"a-.com", "starts or ends with '-'"},
		{strings.Repeat("a", 64) + ".com", "longer than 63"},
		{strings.Repeat("a.", 126) + "com", "longer than 253"},
	}
	for _, tt := range tests {
		n, err := ParseName(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseName(%q) = %q, %v; want an error containing %q", tt.in, n, err, tt.want)
		}
		if !n.IsZero() {
			t.Errorf("ParseName(%q) returned a name with an error", tt.in)
		}
	}
}

func TestParseHostFoldsASCIIOnly(t *testing.T) {
	if n, err := ParseHost("WWW.Example.COM"); err != nil || n.String() != "www.example.com" {
		t.Errorf("ParseHost = %q, %v", n, err)
	}
	// U+212A KELVIN SIGN lowercases to 'k' under Unicode rules; it must
	// not fold into an allowed ASCII name.
	for _, s := range []string{"\u212Aexample.com", "exampl\u0130.com", "127.0.0.1", "LOCALHOST"} {
		if n, err := ParseHost(s); err == nil {
			t.Errorf("ParseHost(%q) = %q, want an error", s, n)
		}
	}
}

func TestAllowedIsExact(t *testing.T) {
	list := []Name{mustName(t, "example.com"), mustName(t, "api.github.com")}
	tests := []struct {
		host string
		want bool
	}{
		{"example.com", true}, {"EXAMPLE.com", true}, {"api.github.com", true},
		{"www.example.com", false}, {"github.com", false}, {"example.com.evil.org", false},
		{"evil-example.com", false}, {"xample.com", false},
	}
	for _, tt := range tests {
		h, err := ParseHost(tt.host)
		if err != nil {
			t.Fatal(err)
		}
		if got := Allowed(h, list); got != tt.want {
			t.Errorf("Allowed(%q) = %v, want %v", tt.host, got, tt.want)
		}
	}
	if Allowed(Name{}, []Name{{}}) {
		t.Error("the zero Name is allowed")
	}
}

func TestText(t *testing.T) {
	var n Name
	if err := n.UnmarshalText([]byte("a.example")); err != nil || n.String() != "a.example" {
		t.Errorf("UnmarshalText = %q, %v", n, err)
	}
	if err := n.UnmarshalText([]byte("127.0.0.1")); err == nil || n.String() != "a.example" {
		t.Errorf("UnmarshalText(127.0.0.1) = %v, left %q", err, n)
	}
	if _, err := (Name{}).MarshalText(); err == nil {
		t.Error("MarshalText of the zero Name succeeded")
	}
}

func mustName(t *testing.T, s string) Name {
	t.Helper()
	n, err := ParseName(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// FuzzParseHost: whatever ParseHost accepts is canonical (ParseName takes
// its output back unchanged) and is never an IP address.
func FuzzParseHost(f *testing.F) {
	for _, s := range []string{"example.com", "127.1", "0x7f.1", "[::1]", "A.B", "\u212a.com"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseHost(s)
		if err != nil {
			return
		}
		m, err := ParseName(n.String())
		if err != nil || m != n {
			t.Fatalf("ParseHost(%q) = %q, which ParseName refuses: %v", s, n, err)
		}
		if len(s) != len(n.String()) || !strings.EqualFold(s, n.String()) {
			t.Fatalf("ParseHost(%q) = %q changed more than ASCII case", s, n)
		}
	})
}
