package arch

import (
	"strings"
	"testing"
)

func TestRepoSocketNames(t *testing.T) { report(t, SocketNames(root)) }
func TestRepoFrames(t *testing.T)      { report(t, Frames(root)) }

// TestPlantedWire plants each wire rule's violations beside code it must
// let pass, and wants exactly the violations reported.
func TestPlantedWire(t *testing.T) {
	const frameImport = "import _ \"example.com/m/pkg/socket/frame\"\n"
	for _, tt := range []struct {
		rule  string
		check func(string) []string
		files map[string]string
		want  []string
	}{
		{"socket names", SocketNames, map[string]string{
			"pkg/socket/wire/socket.go": "// Package wire names sockets.\npackage wire\nvar n = \"broker.sock\"\n",
			"cmd/bxctl/internal/c/c.go": "// Package c types a path.\npackage c\nvar p = \"/state/run/admin/admin.sock\"\n",
			"cmd/loopd/x_test.go":       "package main\nvar n = `memtool.sock`\n",
			"cmd/toolkit/t.go":          "// Package main has its own socket.\npackage main\nvar e, l = \"egress.sock\", \"not loop.sock in a sentence\"\n",
		}, []string{"cmd/bxctl/internal/c/c.go:3: writes the socket name", "cmd/loopd/x_test.go:2: writes the socket name"}},
		{"frames", Frames, map[string]string{
			"pkg/socket/frame/frame.go":       "// Package frame frames.\npackage frame\n",
			"pkg/socket/rpc/rpc.go":           "// Package rpc talks.\npackage rpc\n" + frameImport,
			"cmd/brokerd/internal/b/b.go":     "// Package b writes its own frames.\npackage b\n" + frameImport,
			"cmd/loopd/internal/s/s_test.go":  "package s\n" + frameImport,
			"checks/sockettest/sockettest.go": "// Package sockettest frames by hand.\npackage sockettest\n" + frameImport,
		}, []string{"cmd/brokerd/internal/b/b.go: imports pkg/socket/frame", "checks/sockettest/sockettest.go: imports pkg/socket/frame"}},
	} {
		got := tt.check(plant(t, tt.files))
		for _, w := range tt.want {
			expect(t, got, w)
		}
		if len(got) != len(tt.want) {
			t.Errorf("%s: got %d problems, want %d:\n%s", tt.rule, len(got), len(tt.want), strings.Join(got, "\n"))
		}
	}
}
