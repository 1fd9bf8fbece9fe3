// Package imagearchive reads a Boxmaker image as images/role-image writes
// it: a docker-archive (what `podman load` takes) of one image with one
// layer. [Read] accepts an archive only when its image ID is the sha256 of
// its config, the layer's sha256 is the config's one diff_id, and every
// part decodes strictly and fits the caps; [Archive.Extract] unpacks the
// layer into a new directory, accepting only plain directories and
// regular files with clean relative names and no setuid, setgid or
// device bits, so an archive can neither write outside the directory nor
// plant a privilege in it. A role image's ID is thus a name for exactly
// the bytes a unit runs.
package imagearchive

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

// Caps on what an archive may hold: a role's static binary is tens of MB.
const (
	MaxArchive = 512 << 20 // the archive's whole size
	MaxEntries = 4096      // entries in the layer
	maxMeta    = 64 << 10  // manifest.json and the config
)

// Config is the part of the image config Boxmaker writes and reads.
type Config struct {
	Architecture string      `json:"architecture"`
	OS           string      `json:"os"`
	Created      string      `json:"created"`
	Config       ImageConfig `json:"config"`
	RootFS       RootFS      `json:"rootfs"`
}

// ImageConfig is how the image runs.
type ImageConfig struct {
	Entrypoint []string `json:"Entrypoint"`
	Env        []string `json:"Env"`
	User       string   `json:"User"`
	WorkingDir string   `json:"WorkingDir"`
}

// RootFS names the layers by their digests.
type RootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

type manifestEntry struct {
	Config   string   `json:"Config"`
	RepoTags []string `json:"RepoTags"`
	Layers   []string `json:"Layers"`
}

// Archive is one checked image.
type Archive struct {
	ID     string // sha256:<64 hex>, the sha256 of the config
	Config Config
	Tags   []string
	layer  []byte
}

var hexRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ErrInvalid marks every refusal of an archive's contents.
var ErrInvalid = errors.New("invalid image archive")

func invalid(format string, a ...any) error {
	return fmt.Errorf("read image archive: %w: "+format+"; see docs/runbook.md#install-image", append([]any{ErrInvalid}, a...)...)
}

// Read checks the archive in b.
func Read(b []byte) (*Archive, error) {
	if len(b) > MaxArchive {
		return nil, invalid("%d bytes, over %d", len(b), MaxArchive)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, invalid("%v", err)
		}
		if len(files) > 16 {
			return nil, invalid("more than 16 files")
		}
		name := strings.TrimPrefix(h.Name, "./")
		switch h.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
		default:
			return nil, invalid("%q is neither a file nor a directory", h.Name)
		}
		if _, dup := files[name]; dup {
			return nil, invalid("%q appears twice", name)
		}
		body, err := io.ReadAll(io.LimitReader(tr, MaxArchive+1))
		if err != nil {
			return nil, invalid("%v", err)
		}
		files[name] = body
	}
	var man []manifestEntry
	if err := meta(files, "manifest.json", &man); err != nil {
		return nil, err
	}
	if len(man) != 1 || len(man[0].Layers) != 1 {
		return nil, invalid("want one image with one layer, the manifest has %d images", len(man))
	}
	m := man[0]
	id := strings.TrimSuffix(m.Config, ".json")
	if !hexRE.MatchString(id) || m.Config != id+".json" {
		return nil, invalid("config name %q is not <64 hex>.json", m.Config)
	}
	if sum := sha256.Sum256(files[m.Config]); hex.EncodeToString(sum[:]) != id {
		return nil, invalid("the config's sha256 is not its name %s", id)
	}
	a := &Archive{ID: "sha256:" + id, Tags: m.RepoTags}
	if err := meta(files, m.Config, &a.Config); err != nil {
		return nil, err
	}
	layer, ok := files[m.Layers[0]]
	if !ok {
		return nil, invalid("layer %q is missing", m.Layers[0])
	}
	sum := sha256.Sum256(layer)
	if d := a.Config.RootFS.DiffIDs; a.Config.RootFS.Type != "layers" || len(d) != 1 || d[0] != "sha256:"+hex.EncodeToString(sum[:]) {
		return nil, invalid("the layer's sha256 is not the config's one diff_id")
	}
	a.layer = layer
	return a, nil
}

// meta decodes files[name] strictly into v.
func meta(files map[string][]byte, name string, v any) error {
	b, ok := files[name]
	if !ok {
		return invalid("%s is missing", name)
	}
	if len(b) > maxMeta {
		return invalid("%s is %d bytes, over %d", name, len(b), maxMeta)
	}
	if err := strict.Unmarshal(b, v); err != nil {
		return invalid("%s: %v", name, err)
	}
	return nil
}

// ReadFile checks the archive at p.
func ReadFile(p string) (*Archive, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("read image archive: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxArchive+1))
	if err != nil {
		return nil, fmt.Errorf("read image archive %s: %w", p, err)
	}
	a, err := Read(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return a, nil
}

// Entry is one file or directory of the layer.
type Entry struct {
	Name string      // clean, relative, slash-separated
	Mode fs.FileMode // permission bits (and sticky)
	Dir  bool
	Body []byte
}

// Entries is the layer's contents, checked: only directories and regular
// files, names clean and relative, no setuid, setgid or device bits, at
// most MaxEntries.
func (a *Archive) Entries() ([]Entry, error) {
	var out []Entry
	tr := tar.NewReader(bytes.NewReader(a.layer))
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, invalid("layer: %v", err)
		}
		if len(out) >= MaxEntries {
			return nil, invalid("layer: more than %d entries", MaxEntries)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		if h.Name == "./" || name == "." {
			continue
		}
		if name == "" || path.Clean(name) != name || strings.HasPrefix(name, "../") || name == ".." || path.IsAbs(name) {
			return nil, invalid("layer: name %q is not clean and relative", h.Name)
		}
		if seen[name] {
			return nil, invalid("layer: %q appears twice", name)
		}
		seen[name] = true
		if h.Mode&^0o1777 != 0 {
			return nil, invalid("layer: %s has mode %o (setuid, setgid or more)", name, h.Mode)
		}
		e := Entry{Name: name, Mode: fs.FileMode(h.Mode & 0o777)}
		if h.Mode&0o1000 != 0 {
			e.Mode |= fs.ModeSticky
		}
		switch h.Typeflag {
		case tar.TypeDir:
			e.Dir = true
		case tar.TypeReg:
			if e.Body, err = io.ReadAll(tr); err != nil {
				return nil, invalid("layer: %v", err)
			}
		default:
			return nil, invalid("layer: %s is neither a file nor a directory", name)
		}
		if d := path.Dir(name); d != "." && !seen[d] {
			return nil, invalid("layer: %s comes before its directory", name)
		}
		out = append(out, e)
	}
}

// Extract unpacks the layer into dir, which must not exist; its parent
// must. Every file is created new (O_EXCL, never through a link); the
// directory is made 0755 and left as the archive says.
func (a *Archive) Extract(dir string) error {
	es, err := a.Entries()
	if err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("extract image %s: %w", a.ID, err)
	}
	for _, e := range es {
		p := filepath.Join(dir, filepath.FromSlash(e.Name))
		if e.Dir {
			if err := os.Mkdir(p, 0o700); err != nil {
				return fmt.Errorf("extract image %s: %w", a.ID, err)
			}
		} else {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return fmt.Errorf("extract image %s: %w", a.ID, err)
			}
			_, werr := f.Write(e.Body)
			if err := errors.Join(werr, f.Close()); err != nil {
				return fmt.Errorf("extract image %s: %w", a.ID, err)
			}
		}
		if err := os.Chmod(p, e.Mode); err != nil {
			return fmt.Errorf("extract image %s: %w", a.ID, err)
		}
	}
	return os.Chmod(dir, 0o755)
}
