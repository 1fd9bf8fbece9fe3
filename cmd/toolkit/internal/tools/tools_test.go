package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// testEnv is an Env whose secret directory is a private temporary one
// and which has no egress socket.
func testEnv(t *testing.T) (Env, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	run := t.TempDir()
	env := Env{Stdout: &out, Stderr: &errb, SecretDir: filepath.Join(run, "secrets"), EgressSocket: filepath.Join(run, "egress", "egress.sock"), Shell: "/bin/sh"}
	return env, &out, &errb
}

// input writes the envelope as brokerd's runner would.
func input(t *testing.T, args any, secretName, secretValue string) string {
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]any{"args": json.RawMessage(raw)}
	if secretName != "" {
		env["secret"] = map[string]string{"name": secretName, "value": secretValue}
	}
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMisuse(t *testing.T) {
	const marker = "MARKER-9f3c"
	tests := []struct {
		name, tool, in, want string
	}{
		{"unknown tool", "rm_rf", `{"args":{}}`, MisuseUsage},
		{"memory tool", "recall", `{"args":{}}`, MisuseUsage},
		{"empty stdin", "read_file", ``, MisuseInput},
		{"not JSON", "read_file", marker, MisuseInput},
		{"unknown envelope field", "read_file", `{"args":{"path":"/x"},"` + marker + `":1}`, MisuseInput},
		{"unknown argument", "read_file", `{"args":{"path":"/x","` + marker + `":1}}`, MisuseInput},
		{"relative path", "read_file", `{"args":{"path":"` + marker + `"}}`, MisuseInput},
		{"unclean path", "write_file", `{"args":{"path":"/tmp/../` + marker + `","content":""}}`, MisuseInput},
		{"another tool's args", "shell", `{"args":{"path":"/` + marker + `"}}`, MisuseInput},
		{"bad secret name", "read_file", `{"args":{"path":"/x"},"secret":{"name":"` + marker + `","value":"v"}}`, MisuseInput},
		{"trailing data", "read_file", `{"args":{"path":"/x"}}` + marker, MisuseInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, out, errb := testEnv(t)
			code := Run(context.Background(), env, tt.tool, strings.NewReader(tt.in))
			if code != ExitMisuse || errb.String() != tt.want+"\n" || out.Len() != 0 {
				t.Errorf("Run = %d, stdout %q, stderr %q; want 2 and the fixed sentence", code, out, errb)
			}
			if strings.Contains(errb.String(), marker) || strings.Contains(errb.String(), "rm_rf") {
				t.Error("misuse message echoes the input")
			}
		})
	}
}

func TestShell(t *testing.T) {
	shellTools(t)
	dir := t.TempDir()
	tests := []struct {
		name, cmd, workdir string
		code               int
		stdout, lastErr    string
	}{
		{"ok", "echo hello; echo oops >&2", dir, ExitDone, "hello\n", "oops"},
		{"workdir", "pwd", dir, ExitDone, dir + "\n", ""},
		{"exit status", "echo partial; exit 3", dir, ExitTool, "partial\n", "exit status 3"},
		{"signal", "kill -9 $$", dir, ExitTool, "", "killed by signal 9"},
		{"stdin is empty", "cat; echo done", dir, ExitDone, "done\n", ""},
		{"missing workdir", "true", dir + "/nope", ExitTool, "", "workdir " + dir + "/nope does not exist or is not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, out, errb := testEnv(t)
			code := Run(context.Background(), env, toolset.Shell, strings.NewReader(input(t, map[string]string{"command": tt.cmd, "workdir": tt.workdir}, "", "")))
			lines := strings.Split(strings.TrimRight(errb.String(), "\n"), "\n")
			if code != tt.code || out.String() != tt.stdout || lines[len(lines)-1] != tt.lastErr {
				t.Errorf("Run = %d, stdout %q, stderr %q; want %d, %q, last stderr line %q", code, out, errb, tt.code, tt.stdout, tt.lastErr)
			}
		})
	}
}

// TestShellSecret: the secret is in a 0400 file in the private directory,
// the command's environment holds only its path, and the value is in no
// environment variable or argument.
func TestShellSecret(t *testing.T) {
	shellTools(t)
	env, out, errb := testEnv(t)
	const value = "hunter2-secret-value"
	cmd := `env | sort; echo ---; cat "$BOXMAKER_SECRET_FILE"; echo; echo ---; cat /proc/$$/cmdline | tr '\0' ' '`
	code := Run(context.Background(), env, toolset.Shell, strings.NewReader(input(t, map[string]string{"command": cmd, "workdir": t.TempDir()}, "API_TOKEN", value)))
	if code != ExitDone {
		t.Fatalf("Run = %d, stderr %q", code, errb)
	}
	parts := strings.Split(out.String(), "---\n")
	if len(parts) != 3 {
		t.Fatalf("output %q", out)
	}
	file := filepath.Join(env.SecretDir, "API_TOKEN")
	vars := strings.Fields(parts[0])
	want := []string{"BOXMAKER_SECRET_FILE=" + file, "HOME=/tmp", "LANG=C.UTF-8", "PATH=/bin:/usr/bin", "PWD="}
	var names []string
	for _, v := range vars {
		if strings.HasPrefix(v, "PWD=") {
			v = "PWD="
		}
		if strings.HasPrefix(v, "SHLVL=") || strings.HasPrefix(v, "_=") || strings.HasPrefix(v, "OLDPWD") {
			continue // set by sh itself
		}
		if strings.HasPrefix(v, "TMPDIR=") {
			continue
		}
		names = append(names, v)
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("environment = %v, want %v", names, want)
	}
	if strings.Contains(parts[0], value) || strings.Contains(parts[2], value) {
		t.Error("the secret value is in the environment or argv")
	}
	if parts[1] != value+"\n" {
		t.Errorf("secret file holds %q", parts[1])
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o400 {
		t.Errorf("secret file: %v, %v; want mode 0400", fi, err)
	}
	di, err := os.Stat(env.SecretDir)
	if err != nil || di.Mode().Perm() != 0o700 {
		t.Errorf("secret dir: %v, %v; want mode 0700", di, err)
	}
	// read_file and write_file never reach the private directories.
	for _, tt := range []struct{ tool, args string }{
		{"read_file", `{"path":"` + file + `"}`},
		{"read_file", `{"path":"` + filepath.Dir(env.SecretDir) + `"}`},
		{"write_file", `{"path":"` + file + `","content":"x"}`},
		{"write_file", `{"path":"` + filepath.Join(filepath.Dir(env.EgressSocket), "egress.sock") + `","content":"x"}`},
	} {
		var o, e bytes.Buffer
		env3 := env
		env3.Stdout, env3.Stderr = &o, &e
		code := Run(context.Background(), env3, tt.tool, strings.NewReader(`{"args":`+tt.args+`}`))
		if code != ExitTool || strings.Contains(o.String(), value) || !strings.Contains(e.String(), "private runtime directory") {
			t.Errorf("%s %s = %d, %q, %q", tt.tool, tt.args, code, o.String(), e.String())
		}
	}
	// With the tmpfs check on, a secret directory on a disk is refused
	// and nothing is written; on a tmpfs (/dev/shm) it is accepted.
	envDisk := env
	envDisk.SecretTmpfs = true
	envDisk.SecretDir = filepath.Join(t.TempDir(), "secrets")
	var eb bytes.Buffer
	envDisk.Stderr = &eb
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(envDisk.SecretDir), &st); err == nil && st.Type != tmpfsMagic {
		if code := Run(context.Background(), envDisk, toolset.Shell, strings.NewReader(input(t, map[string]string{"command": "true", "workdir": "/"}, "API_TOKEN", value))); code != ExitTool || !strings.Contains(eb.String(), "not a private tmpfs") {
			t.Errorf("secret on a disk: %d, %q", code, eb.String())
		}
		if _, err := os.Stat(envDisk.SecretDir); err == nil {
			t.Error("the secret directory was created on a disk")
		}
	}
	if err := syscall.Statfs("/dev/shm", &st); err == nil && st.Type == tmpfsMagic {
		shm, err := os.MkdirTemp("/dev/shm", "toolkit-test-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(shm)
		envShm := env
		envShm.SecretTmpfs, envShm.SecretDir = true, filepath.Join(shm, "secrets")
		if code := Run(context.Background(), envShm, toolset.Shell, strings.NewReader(input(t, map[string]string{"command": "true", "workdir": "/"}, "API_TOKEN", value))); code != ExitDone {
			t.Errorf("secret on a tmpfs: exit %d", code)
		}
	}
	// A second call in the same private directory (never the case in a
	// fresh container) cannot be made to overwrite or follow a planted
	// file.
	env2, _, errb2 := env, env.Stdout, &bytes.Buffer{}
	env2.Stderr = errb2
	if code := Run(context.Background(), env2, toolset.Shell, strings.NewReader(input(t, map[string]string{"command": "true", "workdir": "/"}, "API_TOKEN", "other"))); code != ExitTool || !strings.Contains(errb2.String(), "could not be placed") {
		t.Errorf("second secret write = %d, %q", code, errb2)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.txt")
	big := filepath.Join(dir, "big.bin")
	exact := filepath.Join(dir, "exact.bin")
	fifo := filepath.Join(dir, "fifo")
	must(t, os.WriteFile(small, []byte("hello\x00world"), 0o644))
	must(t, os.WriteFile(big, make([]byte, MaxRead+1), 0o644))
	must(t, os.WriteFile(exact, bytes.Repeat([]byte("a"), MaxRead), 0o644))
	must(t, syscall.Mkfifo(fifo, 0o644))
	tests := []struct {
		name, path string
		code       int
		stdoutLen  int
		err        string
	}{
		{"small", small, ExitDone, 11, ""},
		{"exactly the cap", exact, ExitDone, MaxRead, ""},
		{"over the cap", big, ExitTool, 0, "the file is 1048577 bytes, over the 1048576-byte limit"},
		{"missing", filepath.Join(dir, "nope"), ExitTool, 0, "no such file or directory"},
		{"directory", dir, ExitTool, 0, "not a regular file"},
		{"fifo", fifo, ExitTool, 0, "not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, out, errb := testEnv(t)
			code := Run(context.Background(), env, "read_file", strings.NewReader(input(t, map[string]string{"path": tt.path}, "", "")))
			if code != tt.code || out.Len() != tt.stdoutLen || !strings.Contains(errb.String(), tt.err) {
				t.Errorf("Run = %d, %d bytes out, stderr %q; want %d, %d bytes, %q", code, out.Len(), errb, tt.code, tt.stdoutLen, tt.err)
			}
		})
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing")
	must(t, os.WriteFile(existing, []byte("old"), 0o600))
	link := filepath.Join(dir, "link")
	must(t, os.Symlink(existing, link))
	tests := []struct {
		name, path, content string
		code                int
		err                 string
		mode                os.FileMode
	}{
		{"create", filepath.Join(dir, "new.txt"), "new content", ExitDone, "", 0o644},
		{"replace keeps mode", existing, "replaced", ExitDone, "", 0o600},
		{"empty", filepath.Join(dir, "empty"), "", ExitDone, "", 0o644},
		{"symlink", link, "x", ExitTool, "symbolic link", 0},
		{"directory", dir, "x", ExitTool, "not a regular file", 0},
		{"missing dir", filepath.Join(dir, "no", "file"), "x", ExitTool, "no such file or directory", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, out, errb := testEnv(t)
			code := Run(context.Background(), env, "write_file", strings.NewReader(input(t, map[string]string{"path": tt.path, "content": tt.content}, "", "")))
			if code != tt.code || !strings.Contains(errb.String(), tt.err) {
				t.Fatalf("Run = %d, stderr %q; want %d, %q", code, errb, tt.code, tt.err)
			}
			if code != ExitDone {
				return
			}
			b, err := os.ReadFile(tt.path)
			if err != nil || string(b) != tt.content {
				t.Errorf("file holds %q, %v", b, err)
			}
			if fi, _ := os.Stat(tt.path); fi.Mode().Perm() != tt.mode {
				t.Errorf("mode %v, want %v", fi.Mode().Perm(), tt.mode)
			}
			if !strings.HasPrefix(out.String(), "wrote ") {
				t.Errorf("stdout %q", out)
			}
		})
	}
	if b, _ := os.ReadFile(existing); string(b) != "replaced" {
		t.Errorf("the symlink's target changed to %q", b)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".boxmaker-write-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
