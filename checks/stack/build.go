package stack

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// buildCache holds each role built once per test binary, by its build
// tags: the stack tests all run the same few binaries, and building them
// again for every test was most of what the package spent.
type buildCache struct {
	mu  sync.Mutex // guards dir and all
	dir string     // where builds go; "" outside Main (nothing shared)
	all map[string]*build
}

// build is one role built with one set of tags.
type build struct {
	ready chan struct{} // closed once path or err is final
	path  string
	err   error
}

var builds buildCache

// start makes dir the place every later build goes.
func (c *buildCache) start(dir string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dir, c.all = dir, map[string]*build{}
}

// into puts roles, each built with its own tags and extra, into bin: as
// hard links to the shared build under Main (a copy where a link cannot
// be made), else built there directly. A role another test is building
// is waited for, not built twice.
func (c *buildCache) into(bin string, extra, roles []string) error {
	groups := map[string][]string{} // roles by their tags, each group one go build
	tagsOf := map[string][]string{}
	for _, role := range roles {
		tags, err := roleTags(role, extra)
		if err != nil {
			return err
		}
		key := strings.Join(tags, ",")
		tagsOf[key] = tags
		groups[key] = append(groups[key], role)
	}
	c.mu.Lock()
	if c.dir == "" {
		c.mu.Unlock()
		for key, rs := range groups {
			if err := goBuild(bin, tagsOf[key], rs); err != nil {
				return err
			}
		}
		return nil
	}
	mine := map[string][]*build{} // the builds this call makes, by tags
	mineRoles := map[string][]string{}
	wait := map[string]*build{}
	for key, rs := range groups {
		dir := "plain"
		if key != "" {
			dir = strings.ReplaceAll(key, ",", "+")
		}
		for _, role := range rs {
			b, ok := c.all[role+" "+key]
			if !ok {
				b = &build{ready: make(chan struct{}), path: filepath.Join(c.dir, dir, role)}
				c.all[role+" "+key] = b
				mine[key] = append(mine[key], b)
				mineRoles[key] = append(mineRoles[key], role)
			}
			wait[role] = b
		}
	}
	c.mu.Unlock()
	for key, bs := range mine {
		dir := filepath.Dir(bs[0].path)
		err := os.MkdirAll(dir, 0o755)
		if err == nil {
			err = goBuild(dir, tagsOf[key], mineRoles[key])
		}
		for _, b := range bs {
			b.err = err
			close(b.ready)
		}
	}
	for _, role := range roles {
		b := wait[role]
		<-b.ready
		if b.err != nil {
			return b.err
		}
		if err := place(b.path, filepath.Join(bin, role)); err != nil {
			return fmt.Errorf("build %s: %w", role, err)
		}
	}
	return nil
}

// roleTags are role's tags (cmd/<role>/tags.txt, as `make build` uses
// them) and extra.
func roleTags(role string, extra []string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(root(), "cmd", role, "tags.txt"))
	if os.IsNotExist(err) {
		return extra, nil
	}
	if err != nil {
		return nil, fmt.Errorf("build %s: %w", role, err)
	}
	return append(strings.Fields(string(b)), extra...), nil
}

// goBuild builds roles, static, with tags into dir: one go command, so
// that it links them in parallel. The flags are images/role-image's
// (less its stripping), so the two share the Go build cache's compiled
// packages: on a cold machine whichever runs first compiles them.
func goBuild(dir string, tags, roles []string) error {
	args := []string{"build", "-trimpath", "-buildvcs=false", "-o", dir + string(filepath.Separator)}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	for _, role := range roles {
		args = append(args, "wntrmute.dev/boxmaker/cmd/"+role)
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %v\n%s", strings.Join(roles, " "), err, out)
	}
	return nil
}

// place makes dst the file src: a hard link, or a copy across file
// systems. What was at dst is removed first, so a link never writes
// through to the shared build.
func place(src, dst string) error {
	if err := os.Remove(dst); err != nil && !os.IsNotExist(err) {
		return err
	}
	if os.Link(src, dst) == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
