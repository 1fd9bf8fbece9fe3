package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildImage runs images/tool-image and returns the tar's bytes. Without
// busybox-static it skips, unless CI is set: there it fails.
func buildImage(t *testing.T) []byte {
	t.Helper()
	if out, err := exec.Command("dpkg", "-S", "/bin/busybox").CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "busybox-static:") {
		if os.Getenv("CI") != "" {
			t.Fatal("busybox-static is not installed; checks/setup installs it")
		}
		t.Skip("busybox-static is not installed (apt-get install busybox-static ca-certificates)")
	}
	out := filepath.Join(t.TempDir(), "tool.tar")
	cmd := exec.Command("../../images/tool-image", out)
	cmd.Env = append(os.Environ(), "TOOLKIT_TAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("images/tool-image: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestToolImage checks the root filesystem against the runner contract.
func TestToolImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the tool image")
	}
	img := buildImage(t)
	type entry struct {
		hdr  *tar.Header
		body []byte
	}
	files := map[string]entry{}
	tr := tar.NewReader(bytes.NewReader(img))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		files["/"+name] = entry{h, body}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s is owned by %d:%d, want 0:0", h.Name, h.Uid, h.Gid)
		}
		if h.Mode&0o6000 != 0 {
			t.Errorf("%s is setuid or setgid (mode %o)", h.Name, h.Mode)
		}
		if h.Typeflag == tar.TypeReg && h.Mode&0o022 != 0 {
			t.Errorf("%s is writable by group or others (mode %o)", h.Name, h.Mode)
		}
	}
	for _, bin := range []string{"/bin/toolkit", "/bin/busybox"} {
		e, ok := files[bin]
		if !ok || e.hdr.Typeflag != tar.TypeReg || e.hdr.Mode&0o111 == 0 {
			t.Fatalf("%s missing or not an executable file", bin)
		}
		f, err := elf.NewFile(bytes.NewReader(e.body))
		if err != nil {
			t.Fatalf("%s: %v", bin, err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC && bin == "/bin/toolkit" {
				t.Errorf("%s is dynamically linked", bin)
			}
		}
	}
	for _, a := range []string{"sh", "cat", "ls", "echo", "id", "sleep", "head", "dd", "yes", "wc", "env", "kill"} {
		if e, ok := files["/bin/"+a]; !ok || e.hdr.Typeflag != tar.TypeSymlink || e.hdr.Linkname != "busybox" {
			t.Errorf("/bin/%s is not a symlink to busybox", a)
		}
	}
	if e := files["/etc/passwd"]; string(e.body) != "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n" {
		t.Errorf("/etc/passwd = %q", e.body)
	}
	if e := files["/etc/group"]; string(e.body) != "root:x:0:\nnogroup:x:65534:\n" {
		t.Errorf("/etc/group = %q", e.body)
	}
	if ca := files["/etc/ssl/certs/ca-certificates.crt"]; !x509.NewCertPool().AppendCertsFromPEM(ca.body) {
		t.Error("the CA bundle holds no certificate")
	}
	for _, d := range []string{"/tmp", "/run", "/work"} {
		e, ok := files[d]
		if !ok || e.hdr.Typeflag != tar.TypeDir {
			t.Errorf("%s is not a directory", d)
		}
		for name := range files {
			if strings.HasPrefix(name, d+"/") {
				t.Errorf("%s is not empty: %s", d, name)
			}
		}
	}
	if files["/tmp"].hdr.Mode&0o1777 != 0o1777 {
		t.Errorf("/tmp mode %o", files["/tmp"].hdr.Mode)
	}
	if _, ok := files["/etc/boxmaker-tool-tags"]; ok {
		t.Error("a release image carries build tags")
	}
	// The same source gives the same bytes: an image ID means something.
	if again := buildImage(t); !bytes.Equal(again, img) {
		t.Error("two builds of the image differ")
	}
	// The image's toolkit runs.
	bin := filepath.Join(t.TempDir(), "toolkit")
	if err := os.WriteFile(bin, files["/bin/toolkit"].body, 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "f.txt")
	if err := os.WriteFile(target, []byte("from the image"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "read_file")
	cmd.Stdin = strings.NewReader(`{"args":{"path":"` + target + `"}}`)
	out, err := cmd.Output()
	if err != nil || string(out) != "from the image" {
		t.Errorf("image toolkit read_file = %q, %v", out, err)
	}
}
