package layout

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestThreatModelIsTheTable: docs/threat-model.md holds exactly the
// table and reach that Markdown generates.
func TestThreatModelIsTheTable(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "threat-model.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, DocBegin), strings.Index(doc, DocEnd)
	if i < 0 || j < i {
		t.Fatalf("docs/threat-model.md lacks the markers %q and %q", DocBegin, DocEnd)
	}
	if got, want := strings.TrimSpace(doc[i+len(DocBegin):j]), strings.TrimSpace(Markdown()); got != want {
		t.Errorf("docs/threat-model.md's table differs from layout.Markdown(); paste this between the markers:\n%s", want)
	}
}

func me() Users { return SingleUser(ID{uint32(os.Geteuid()), uint32(os.Getegid())}) }

// made is a fresh state directory as bxctl up makes it for this user.
func made(t *testing.T) string {
	t.Helper()
	state := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Make(state, me()); err != nil {
		t.Fatal(err)
	}
	return state
}

func TestCheckPassesWhatMakeMade(t *testing.T) {
	state := made(t)
	for _, r := range Daemons {
		if err := Check(state, me(), r); err != nil {
			t.Errorf("Check(%s) on a fresh state = %v", r, err)
		}
	}
	if ps := Verify(state, me()); len(ps) != 0 {
		t.Errorf("Verify on a fresh state = %v", ps)
	}
}

// TestCheckRefuses: each refusal a daemon makes at start-up, planted in
// a fresh state directory, with its runbook anchor.
func TestCheckRefuses(t *testing.T) {
	for _, c := range []struct {
		name, role, anchor string
		plant              func(t *testing.T, state string) error
	}{
		{"symbolic link", Brokerd, "layout-link", func(t *testing.T, s string) error {
			os.Remove(AdminRun.In(s))
			return os.Symlink(t.TempDir(), AdminRun.In(s))
		}},
		{"group-writable", Memoryd, "layout-writable", func(t *testing.T, s string) error { return os.Chmod(Memory.In(s), 0o770) }},
		{"group-writable config", Loopd, "layout-writable", func(t *testing.T, s string) error {
			os.WriteFile(ConfigFile(Loopd).In(s), nil, 0o600)
			return os.Chmod(ConfigFile(Loopd).In(s), 0o620)
		}},
		{"mode", Gatewayd, "layout-mode", func(t *testing.T, s string) error { return os.Chmod(Gateway.In(s), 0o500) }},
		{"wrong owner", Inferproxy, "layout-owner", func(t *testing.T, s string) error {
			if os.Geteuid() != 0 {
				t.Skip("chown to another uid needs root")
			}
			return os.Chown(InferRun.In(s), 4242, -1)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			state := made(t)
			if err := c.plant(t, state); err != nil {
				t.Fatal(err)
			}
			err := Check(state, me(), c.role)
			if err == nil || !strings.HasSuffix(err.Error(), "see docs/runbook.md#"+c.anchor) {
				t.Errorf("Check(%s) = %v, want a refusal pointing at #%s", c.role, err, c.anchor)
			}
		})
	}
}

func TestUsersRefuseSharedIDs(t *testing.T) {
	good := DefaultUsers(ID{1000, 1000}).Text()
	if _, err := ParseUsers(good, "users.toml"); err != nil {
		t.Fatalf("ParseUsers(defaults) = %v", err)
	}
	for name, text := range map[string]string{
		"shared uid":  strings.Replace(good, "uid = 61002", "uid = 61001", 1),
		"shared gid":  strings.Replace(good, "gid = 61005", "gid = 61004", 1),
		"owner's uid": strings.Replace(good, "uid = 61003", "uid = 1000", 1),
	} {
		_, err := ParseUsers(text, "users.toml")
		if err == nil || !strings.HasSuffix(err.Error(), "see docs/runbook.md#layout-uid-shared") {
			t.Errorf("%s: ParseUsers = %v, want #layout-uid-shared", name, err)
		}
	}
	for name, text := range map[string]string{
		"root role":    strings.Replace(good, "uid = 61001", "uid = 0", 1),
		"missing role": strings.Replace(good, "[memoryd]", "[nobody]", 1),
		"unknown key":  good + "\n[loopd.extra]\n",
	} {
		if _, err := ParseUsers(text, "users.toml"); err == nil {
			t.Errorf("%s: ParseUsers accepted it", name)
		}
	}
}

// TestCheckRefusesWrongUser: with a user per role, a daemon that is not
// running as its table uid (or shares it) refuses.
func TestCheckRefusesWrongUser(t *testing.T) {
	state := made(t)
	u := DefaultUsers(ID{uint32(os.Geteuid()), uint32(os.Getegid())})
	err := Check(state, u, Loopd)
	if err == nil || !strings.HasSuffix(err.Error(), "see docs/runbook.md#layout-uid-shared") {
		t.Errorf("Check as the owner's uid = %v, want #layout-uid-shared", err)
	}
}

func FuzzParseUsers(f *testing.F) {
	f.Add(DefaultUsers(ID{1000, 1000}).Text())
	f.Fuzz(func(t *testing.T, text string) {
		u, err := ParseUsers(text, "f")
		if err != nil {
			return
		}
		if _, err := ParseUsers(u.Text(), "f"); err != nil {
			t.Errorf("round trip of %q: %v", text, err)
		}
	})
}
