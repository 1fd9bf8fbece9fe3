// Package nar writes a file tree as a Nix archive (NAR) and hashes it the
// way Nix hashes a fixed-output derivation with outputHashMode = "recursive"
// (buildGoModule's vendorHash): the SHA-256 of the NAR, written in SRI form
// ("sha256-" and standard base64).
//
// Invariant: [Dump] writes exactly the bytes `nix-store --dump` writes for
// the same tree (TestDumpMatchesNix checks it where Nix is installed): a
// directory's entries sorted by name as bytes, a regular file's executable
// bit and contents, a symlink's target, and nothing else (no owner, no
// mode beyond that bit, no times). Anything else in the tree (a socket, a
// device) is refused.
package nar

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// w writes NAR strings: a little-endian 64-bit length, the bytes, and
// zeros up to a multiple of 8.
type w struct {
	out io.Writer
	err error
}

func (x *w) str(s string) { x.bytes([]byte(s)) }

func (x *w) bytes(b []byte) {
	if x.err != nil {
		return
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
	if _, x.err = x.out.Write(n[:]); x.err != nil {
		return
	}
	if _, x.err = x.out.Write(b); x.err != nil {
		return
	}
	if pad := (8 - len(b)%8) % 8; pad > 0 {
		_, x.err = x.out.Write(make([]byte, pad))
	}
}

// Dump writes the NAR of the tree at path to out.
func Dump(out io.Writer, path string) error {
	x := &w{out: out}
	x.str("nix-archive-1")
	if err := x.node(path); err != nil {
		return fmt.Errorf("nar dump %s: %w", path, err)
	}
	if x.err != nil {
		return fmt.Errorf("nar dump %s: %w", path, x.err)
	}
	return nil
}

func (x *w) node(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	x.str("(")
	x.str("type")
	switch m := fi.Mode(); {
	case m.IsRegular():
		x.str("regular")
		if m&0o111 != 0 {
			x.str("executable")
			x.str("")
		}
		x.str("contents")
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		x.bytes(b)
	case m&os.ModeSymlink != 0:
		x.str("symlink")
		target, err := os.Readlink(path)
		if err != nil {
			return err
		}
		x.str("target")
		x.str(target)
	case m.IsDir():
		x.str("directory")
		entries, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		names := make([]string, 0, len(entries))
		for _, e := range entries {
			names = append(names, e.Name())
		}
		sort.Strings(names) // byte order, as Nix's std::map<std::string>
		for _, n := range names {
			x.str("entry")
			x.str("(")
			x.str("name")
			x.str(n)
			x.str("node")
			if err := x.node(filepath.Join(path, n)); err != nil {
				return err
			}
			x.str(")")
		}
	default:
		return fmt.Errorf("%s is a %v, which a NAR cannot hold", path, m.Type())
	}
	x.str(")")
	return x.err
}

// Hash is the SRI SHA-256 of the tree's NAR, as Nix writes a vendorHash.
func Hash(path string) (string, error) {
	h := sha256.New()
	if err := Dump(h, path); err != nil {
		return "", err
	}
	return "sha256-" + base64.StdEncoding.EncodeToString(h.Sum(nil)), nil
}
