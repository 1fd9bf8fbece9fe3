// Package llamaserver runs a real llama-server for the tests that check
// Boxmaker against one: the binary named by $BOXMAKER_LLAMA_SERVER, in
// router mode as the owner deploys it (`--models-preset`, `--models-max
// 2`), serving the tiny test model (../shared/data/stories260K.gguf) with
// the keep-thinking template under one preset, its model unloaded until a
// client asks for it.
//
// Invariant: without $BOXMAKER_LLAMA_SERVER a test that asks for a server
// is skipped with one line; a server started here listens on loopback
// only, and it and every model instance it spawned are stopped when the
// test ends.
package llamaserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Env names the llama-server binary the real-server tests run.
const Env = "BOXMAKER_LLAMA_SERVER"

// Model is the preset's name: the name clients route on.
const Model = "tiny"

// SlotContext is the per-slot context the preset gives (2 slots of a
// 32,768-token context). The tiny model's training context is 2,048,
// which the server would otherwise cap each slot to, and loopd's
// baseline alone is about 3,000 tokens of its vocabulary, so the preset
// overrides the model's context length (as docs/inference-contract.md's
// measurements did).
const SlotContext = 16384

// StartWait bounds how long the router may take to answer /health.
const StartWait = time.Minute

// Router is a llama-server router started for a test.
type Router struct {
	URL  string // http://127.0.0.1:PORT
	Host string // 127.0.0.1:PORT, as bxctl up --llama takes it
	Log  *Log   // the router's output, its instances' included
}

// Log is a process's output, safe to read while it is written.
type Log struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// data is ../shared/data beside the module, where the brief keeps the
// tiny model and the chat templates.
func data() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "data")
}

// Preset is the router's preset file for the tiny model
// (tools/server/README.md, "Model presets": each key is a command-line
// argument without its dashes).
func Preset(dataDir string) string {
	return fmt.Sprintf(`version = 1

[%s]
model = %s
chat-template-file = %s
jinja = true
parallel = 2
ctx-size = %d
override-kv = llama.context_length=int:%d
load-on-startup = false
`, Model, filepath.Join(dataDir, "stories260K.gguf"), filepath.Join(dataDir, "qwen3.5-keep-thinking.jinja"), 2*SlotContext, SlotContext)
}

// StartRouter starts the router, or skips the test with one line when
// $BOXMAKER_LLAMA_SERVER is not set. It returns once the router answers
// /health, with the model unloaded.
func StartRouter(t testing.TB) *Router {
	t.Helper()
	bin := os.Getenv(Env)
	if bin == "" {
		t.Skip(Env + " is not set: no real llama-server router leg (run with a llama-server binary to have one)")
	}
	dir := t.TempDir()
	preset := filepath.Join(dir, "models.ini")
	if err := os.WriteFile(preset, []byte(Preset(data())), 0o600); err != nil {
		t.Fatal(err)
	}
	host := freeHost(t)
	_, port, _ := net.SplitHostPort(host)
	cmd := exec.Command(bin, "--models-preset", preset, "--models-max", "2", "--host", "127.0.0.1", "--port", port)
	cmd.Dir = dir
	// Its own process group, so that the instances it spawns go with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	log := &Log{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	r := &Router{URL: "http://" + host, Host: host, Log: log}
	for deadline := time.Now().Add(StartWait); ; time.Sleep(100 * time.Millisecond) {
		select {
		case <-done:
			t.Fatalf("llama-server exited before it answered:\n%s", log)
		default:
		}
		if r.healthy() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("llama-server did not answer /health within %v:\n%s", StartWait, log)
		}
	}
	if st := r.Status(t); st != "unloaded" {
		t.Fatalf("the router's %s is %q at start, want unloaded", Model, st)
	}
	return r
}

func (r *Router) healthy() bool {
	resp, err := http.Get(r.URL + "/health")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Status is the model's status as the router's GET /models reports it.
func (r *Router) Status(t testing.TB) string {
	t.Helper()
	resp, err := http.Get(r.URL + "/models")
	if err != nil {
		t.Fatalf("GET /models: %v", err)
	}
	defer resp.Body.Close()
	var out struct {
		Data []struct {
			ID     string `json:"id"`
			Status struct {
				Value string `json:"value"`
			} `json:"status"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("GET /models: %v", err)
	}
	var ids []string
	for _, m := range out.Data {
		if m.ID == Model {
			return m.Status.Value
		}
		ids = append(ids, m.ID)
	}
	t.Fatalf("GET /models lists no %s: %s", Model, strings.Join(ids, ", "))
	return ""
}

// Unload asks the router to unload the model (POST /models/unload), as
// an idle router does, and waits until it reports it unloaded.
func (r *Router) Unload(t testing.TB) {
	t.Helper()
	resp, err := http.Post(r.URL+"/models/unload", "application/json", strings.NewReader(fmt.Sprintf(`{"model":%q}`, Model)))
	if err != nil {
		t.Fatalf("POST /models/unload: %v", err)
	}
	resp.Body.Close()
	for deadline := time.Now().Add(StartWait); r.Status(t) != "unloaded"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s not unloaded within %v", Model, StartWait)
		}
	}
}

// freeHost is a loopback address with a port free a moment ago.
func freeHost(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
