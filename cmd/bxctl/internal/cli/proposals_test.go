package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/ownership"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/socket/wire"
	"wntrmute.dev/boxmaker/pkg/tool/grant"
)

const askGrant = `[[grant]]
id = "dl"
tool = "read_file"
paths = ["/home/owner/Downloads"]
max_taint = "secret"
mode = "ask"
`

const proposal7 = `# Grant proposal from approval 7.
[[grant]]
id = "always-7"
tool = "read_file"
paths = ["/home/owner/Downloads/report.pdf"]
max_taint = "secret"
result_class = "private"
untrusted = true
mode = "auto"
standing = true
`

// proposalState makes a state directory with grants/ (one ask grant) and
// proposal 7, answering brokerd's side with a fake admin.sock.
func proposalState(t *testing.T, proposal string) (string, chan strict.Variant) {
	t.Helper()
	state, got := fakeAdmin(t, &wire.Answered{ID: 7, Outcome: "dropped", Msg: "grant proposal 7 dropped"})
	for _, d := range []string{"grants", "proposals"} {
		if err := os.MkdirAll(filepath.Join(state, d), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(state, "grants", "g.toml"), []byte(askGrant), 0o640)
	os.WriteFile(filepath.Join(state, "proposals", "7.toml"), []byte(proposal), 0o640)
	return state, got
}

func TestGrantsApply(t *testing.T) {
	state, got := proposalState(t, proposal7)
	code, out, _ := run("grants", "proposals", "--state", state)
	if code != ExitOK || !strings.Contains(out, "proposal 7 (bxctl grants apply 7") || !strings.Contains(out, "standing = true") {
		t.Errorf("proposals = %d %q", code, out)
	}
	code, out, stderr := run("grants", "apply", "--state", state, "7")
	if code != ExitOK || !strings.Contains(out, "+ standing = true") || !strings.Contains(out, "a new file always-7.toml") || !strings.Contains(out, "applied:") {
		t.Fatalf("apply = %d %q %q", code, out, stderr)
	}
	b, err := os.ReadFile(filepath.Join(state, "grants", "always-7.toml"))
	if err != nil || string(b) != proposal7 {
		t.Fatalf("grants/always-7.toml = %q, %v", b, err)
	}
	fi, _ := os.Stat(filepath.Join(state, "grants", "always-7.toml"))
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", fi.Mode().Perm())
	}
	if g, _ := os.ReadFile(filepath.Join(state, "grants", "g.toml")); string(g) != askGrant {
		t.Error("the owner's grant file changed")
	}
	set, err := grant.LoadDir(filepath.Join(state, "grants"), ownership.Trust(uint32(os.Getuid())))
	if err != nil || set.Len() != 2 {
		t.Errorf("brokerd's loader on grants/ after apply: %v", err)
	}
	if d, ok := (<-got).(*wire.DropProposal); !ok || d.ID != 7 {
		t.Errorf("brokerd got %#v, want drop_proposal 7", d)
	}
	if code, _, stderr := run("grants", "apply", "--state", state, "7"); code != ExitFailed || !strings.Contains(stderr, "applied before") {
		t.Errorf("a second apply = %d %q", code, stderr)
	}
}

func TestGrantsApplyRefuses(t *testing.T) {
	for _, tt := range []struct{ name, proposal, want string }{
		{"not standing", strings.Replace(proposal7, "standing = true\n", "", 1), "not one standing grant"},
		{"another id", strings.Replace(proposal7, `"always-7"`, `"dl2"`, 1), "not one standing grant"},
		{"does not parse", proposal7 + "bogus = 1\n", "does not parse"},
		{"duplicate id", strings.Replace(proposal7, `"always-7"`, `"dl"`, 1), "not one standing grant"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			state, _ := proposalState(t, tt.proposal)
			code, _, stderr := run("grants", "apply", "--state", state, "7")
			if code != ExitFailed || !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, "runbook.md#proposal-refused") {
				t.Errorf("apply = %d %q, want %q", code, stderr, tt.want)
			}
			if _, err := os.Stat(filepath.Join(state, "grants", "always-7.toml")); !os.IsNotExist(err) {
				t.Error("a refused proposal reached grants/")
			}
		})
	}
}

// TestForgedGrantRefused is the hostile case: a grant file planted in
// grants/ by brokerd's uid (not root, not the owner) makes brokerd's
// loader refuse the whole directory, and apply adds nothing to it.
func TestForgedGrantRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to give a file to another uid")
	}
	state, _ := proposalState(t, proposal7)
	forged := filepath.Join(state, "grants", "always-9.toml")
	os.WriteFile(forged, []byte(strings.Replace(proposal7, "always-7", "always-9", 1)), 0o640)
	const brokerdUID = 61004
	if err := os.Chown(forged, brokerdUID, -1); err != nil {
		t.Fatal(err)
	}
	owner := uint32(61001)
	for _, d := range []string{filepath.Join(state, "grants"), filepath.Join(state, "grants", "g.toml")} {
		os.Chown(d, int(owner), -1)
	}
	if _, err := grant.LoadDir(filepath.Join(state, "grants"), ownership.Trust(owner)); err == nil || !strings.Contains(err.Error(), "owned by uid 61004") {
		t.Errorf("the loader on a forged grant: %v", err)
	}
	code, _, stderr := run("grants", "apply", "--state", state, "--owner-uid", "61001", "7")
	if code != ExitFailed || !strings.Contains(stderr, "grants/ is invalid as it is") {
		t.Errorf("apply beside a forged grant = %d %q", code, stderr)
	}
}
