package roleimage

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/host/imagearchive"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/units"
)

// build runs images/role-image for role into dir and returns the archive's
// path and the ID the script printed.
func build(t *testing.T, role, dir string) (string, string) {
	t.Helper()
	out := filepath.Join(dir, role+".tar")
	// Through bash, not the script's /usr/bin/env shebang, which the
	// Nix sandbox (checks.gate) does not have.
	cmd := exec.Command("bash", "../../images/role-image", role, out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	id, err := cmd.Output()
	if err != nil {
		t.Fatalf("images/role-image %s: %v\n%s", role, err, stderr.Bytes())
	}
	return out, strings.TrimSpace(string(id))
}

// mountPoints are the empty directories every role image has.
var mountPoints = []string{"dev", "proc", "run", "sys", "tmp", "var", "var/lib", "var/lib/boxmaker", "var/tmp"}

func TestRoleImages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every role's image")
	}
	dir := t.TempDir()
	ids := layout.DefaultUsers(layout.ID{})
	for _, role := range layout.Daemons {
		t.Run(role, func(t *testing.T) {
			p, id := build(t, role, dir)
			a, err := imagearchive.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if a.ID != id {
				t.Errorf("the script printed %s, the archive's ID is %s", id, a.ID)
			}
			uid := ids.Of(role).UID
			if c := a.Config.Config; !slices.Equal(c.Entrypoint, []string{"/bin/" + role}) || c.User != fmt.Sprintf("%d:%d", uid, uid) || a.Config.Created != "1970-01-01T00:00:01Z" {
				t.Errorf("config %+v", a.Config)
			}
			es, err := a.Entries()
			if err != nil {
				t.Fatal(err)
			}
			want := append([]string{"bin", "bin/" + role, "etc", "etc/group", "etc/passwd"}, mountPoints...)
			if units.TLS(role) {
				want = append(want, "etc/ssl", "etc/ssl/certs", "etc/ssl/certs/ca-certificates.crt")
			}
			if role != layout.Loopd && role != layout.Brokerd {
				want = append(want, "etc/hosts", "etc/resolv.conf")
			}
			var got []string
			files := map[string][]byte{}
			for _, e := range es {
				got = append(got, e.Name)
				files[e.Name] = e.Body
				mode := os.FileMode(0o644)
				switch {
				case e.Name == "tmp" || e.Name == "var/tmp":
					mode = 0o777 | os.ModeSticky
				case e.Dir || e.Name == "bin/"+role:
					mode = 0o755
				}
				if e.Mode != mode {
					t.Errorf("%s has mode %v, want %v", e.Name, e.Mode, mode)
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("image holds %q, want exactly %q", got, want)
			}
			user := fmt.Sprintf("boxmaker-%s:x:%d:%d:", role, uid, uid)
			if !strings.Contains(string(files["etc/passwd"]), user) || strings.Count(string(files["etc/passwd"]), "\n") != 3 {
				t.Errorf("etc/passwd = %q, want root, nobody and %s", files["etc/passwd"], user)
			}
			f, err := elf.NewFile(bytes.NewReader(files["bin/"+role]))
			if err != nil {
				t.Fatalf("bin/%s: %v", role, err)
			}
			for _, prog := range f.Progs {
				if prog.Type == elf.PT_INTERP || prog.Type == elf.PT_DYNAMIC {
					t.Errorf("bin/%s is dynamically linked", role)
				}
			}
		})
	}
}

// TestRoleImageReproducible builds one image twice and wants the same bytes.
func TestRoleImageReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an image twice")
	}
	a, ida := build(t, layout.Inferproxy, t.TempDir())
	b, idb := build(t, layout.Inferproxy, t.TempDir())
	ba, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if ida != idb || !bytes.Equal(ba, bb) {
		t.Errorf("two builds differ: %s and %s", ida, idb)
	}
}

func TestRoleImageRefusesAnUnknownRole(t *testing.T) {
	out, err := exec.Command("bash", "../../images/role-image", "shell", filepath.Join(t.TempDir(), "x.tar")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not a role") {
		t.Errorf("images/role-image shell = %v, %s", err, out)
	}
}
