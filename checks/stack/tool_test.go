package stack

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	fake "wntrmute.dev/boxmaker/checks/fake/llama"
	"wntrmute.dev/boxmaker/checks/podmantest"
	"wntrmute.dev/boxmaker/checks/roletest"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestStackToolRuns is a tool call end to end, in a real container: a
// chat turn asks to read a file, an auto grant covers it, brokerd runs
// read_file in a fresh container through Podman, the result reaches the
// model labelled with the grant's class and untrusted flag, and `bxctl
// audit verify` finds the decision and the result in an intact chain.
//
// Not parallel: it asserts that the shared Podman service holds no
// container afterwards, which another test's running tool would break
// (sequential tests run before the parallel ones start).
func TestStackToolRuns(t *testing.T) {
	svc := podmantest.Require(t)
	shareWithBrokerd(t, svc.Socket)
	image := svc.ToolImage(t)
	bin, state, srv := stack(t, 65536)
	files := roletest.Readable(t)
	os.WriteFile(filepath.Join(files, "report.txt"), []byte("quarterly numbers: 42\n"), 0o644)
	os.MkdirAll(filepath.Join(state, "grants"), 0o700)
	os.WriteFile(filepath.Join(state, "grants", "files.toml"), []byte(fmt.Sprintf(
		"[[grant]]\nid = \"files-read\"\ntool = \"read_file\"\npaths = [%q]\nmax_taint = \"secret\"\nresult_class = \"secret\"\nuntrusted = true\nmode = \"auto\"\n", files)), 0o600)
	// brokerd's config before bxctl up writes its own: the test's Podman
	// service and image.
	os.WriteFile(filepath.Join(state, "config", "brokerd.toml"), []byte(fmt.Sprintf(
		"[runner]\npodman_socket = %q\ntool_image = %q\n", svc.Socket, image)), 0o600)
	srv.Script(
		fake.Reply{Reasoning: "Read it.", ToolCalls: []fake.ToolCall{{Name: "call_tool", Arguments: fmt.Sprintf(`{"name":"read_file","arguments":{"path":%q}}`, files+"/report.txt")}}},
		fake.Reply{Reasoning: "Done.", Content: "The number is 42."},
	)
	up(t, bin, state, srv)
	out := chat(t, bin, state, "s1", "what is in my report?")
	if !strings.Contains(out, "The number is 42.") {
		t.Fatalf("chat = %q", out)
	}
	// What the model was sent next holds the file's text.
	reqs := srv.Requests(0)
	if last := string(reqs[len(reqs)-1]); !strings.Contains(last, "quarterly numbers: 42") {
		t.Errorf("the model never saw the file; last request:\n%s", last)
	}
	log, _ := os.ReadFile(filepath.Join(state, "sessions", "s1", "0.jsonl"))
	if !strings.Contains(string(log), `"content":"quarterly numbers: 42\n","truncated":false,"class":"secret","untrusted":true`) {
		t.Errorf("session log lacks the labelled result:\n%s", log)
	}
	verify, err := bxctl(t, bin, "audit", "verify", filepath.Join(state, "broker", "audit"))
	if err != nil || !strings.Contains(verify, "2 records") {
		t.Errorf("bxctl audit verify: %v %s; want the decision and its result", err, verify)
	}
	logs, _ := filepath.Glob(filepath.Join(state, "broker", "audit", "*.jsonl"))
	var audit []byte
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		audit = append(audit, b...)
	}
	if !strings.Contains(string(audit), `"outcome":"allowed"`) || !strings.Contains(string(audit), `"class":"secret","untrusted":true`) {
		t.Errorf("audit log lacks the allowed decision or the labelled result:\n%s", audit)
	}
	// brokerd removes the call's container just after its answer.
	if left, err := svc.Remaining(); err != nil || len(left) > 0 {
		t.Errorf("containers left behind: %q %v", left, err)
	}
}

// TestStackUpRunsPodman: `bxctl up --tool-image ID` on a fresh state
// directory writes brokerd's [runner], starts its own Podman API service
// for the stack, and a chat turn's read_file runs through it. Podman's
// storage is redirected to a temporary directory, where the test imports
// the tool image as an owner would with `podman import`.
//
// Not parallel: it sets the process's environment (t.Setenv).
func TestStackUpRunsPodman(t *testing.T) {
	podman, conf, err := podmantest.Find()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skipf("no Podman: %v", err)
	}
	bin, state, srv := stack(t, 65536)
	tmp := roletest.Dir(t)
	home := filepath.Join(tmp, "home")
	os.MkdirAll(filepath.Join(home, ".config", "containers"), 0o700)
	os.WriteFile(filepath.Join(home, ".config", "containers", "policy.json"),
		[]byte(`{"default":[{"type":"reject"}],"transports":{"tarball":{"":[{"type":"insecureAcceptAnything"}]}}}`), 0o600)
	storage := filepath.Join(tmp, "storage.conf")
	os.WriteFile(storage, []byte(fmt.Sprintf("[storage]\ndriver = \"overlay\"\ngraphroot = %q\nrunroot = %q\n",
		filepath.Join(tmp, "root"), filepath.Join(tmp, "run"))), 0o600)
	// The tool image's go build keeps this machine's Go caches: under the
	// test's HOME they would be empty, a cold build (and, offline, no
	// modules at all).
	for _, v := range []string{"GOCACHE", "GOMODCACHE"} {
		out, err := exec.Command("go", "env", v).Output()
		require.NoError(t, err)
		t.Setenv(v, strings.TrimSpace(string(out)))
	}
	t.Setenv("HOME", home)
	t.Setenv("CONTAINERS_STORAGE_CONF", storage)
	t.Setenv("CONTAINERS_CONF", conf)
	t.Setenv("PODMAN_IGNORE_CGROUPSV1_WARNING", "1")
	t.Setenv("PATH", filepath.Dir(podman)+":"+os.Getenv("PATH"))
	tarball := filepath.Join(tmp, "tool.tar")
	if out, err := exec.Command(filepath.Join(root(), "images", "tool-image"), tarball).CombinedOutput(); err != nil {
		t.Fatalf("images/tool-image: %v\n%s", err, out)
	}
	if out, err := exec.Command(podman, "import", tarball, "localhost/boxmaker-tool:test").CombinedOutput(); err != nil {
		t.Fatalf("podman import: %v\n%s", err, out)
	}
	out, err := exec.Command(podman, "image", "inspect", "--format", "{{.ID}}", "localhost/boxmaker-tool:test").Output()
	require.NoError(t, err)
	t.Cleanup(func() { exec.Command(podman, "rmi", "--all", "--force").Run() })
	files := roletest.Readable(t)
	os.Chmod(files, 0o755)
	os.WriteFile(filepath.Join(files, "note.txt"), []byte("through bxctl's podman\n"), 0o644)
	os.MkdirAll(filepath.Join(state, "grants"), 0o700)
	os.WriteFile(filepath.Join(state, "grants", "files.toml"), []byte(fmt.Sprintf(
		"[[grant]]\nid = \"files-read\"\ntool = \"read_file\"\npaths = [%q]\nmax_taint = \"secret\"\nmode = \"auto\"\n", files)), 0o600)
	srv.Script(
		fake.Reply{Reasoning: "Read it.", ToolCalls: []fake.ToolCall{{Name: "call_tool", Arguments: fmt.Sprintf(`{"name":"read_file","arguments":{"path":%q}}`, files+"/note.txt")}}},
		fake.Reply{Reasoning: "Done.", Content: "Read."},
	)
	up(t, bin, state, srv, "--tool-image", "sha256:"+strings.TrimSpace(string(out)))
	if b, _ := os.ReadFile(filepath.Join(state, "config", "brokerd.toml")); !strings.Contains(string(b), "[runner]") {
		t.Fatalf("brokerd.toml has no [runner]:\n%s", b)
	}
	chat(t, bin, state, "s1", "read my note")
	log, _ := os.ReadFile(filepath.Join(state, "sessions", "s1", "0.jsonl"))
	if !strings.Contains(string(log), `"content":"through bxctl's podman\n"`) {
		t.Errorf("session log lacks the file read through bxctl's Podman:\n%s", log)
	}
}
