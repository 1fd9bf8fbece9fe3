package arch

import "testing"

func TestRepoSocketNames(t *testing.T) { report(t, SocketNames(root)) }
func TestRepoFrames(t *testing.T)      { report(t, Frames(root)) }

func TestPlantedSocketName(t *testing.T) {
	dir := plant(t, map[string]string{
		"pkg/wire/socket.go":        "// Package wire names sockets.\npackage wire\nvar n = \"broker.sock\"\n",
		"cmd/bxctl/internal/c/c.go": "// Package c types a path.\npackage c\nvar p = \"/state/run/admin/admin.sock\"\n",
		"cmd/loopd/x_test.go":       "package main\nvar n = `memtool.sock`\n",
		"cmd/toolkit/t.go":          "// Package main has its own socket.\npackage main\nvar e, l = \"egress.sock\", \"not loop.sock in a sentence\"\n",
	})
	got := SocketNames(dir)
	expect(t, got, "cmd/bxctl/internal/c/c.go:3: writes the socket name")
	expect(t, got, "cmd/loopd/x_test.go:2: writes the socket name")
	if len(got) != 2 {
		t.Errorf("SocketNames = %q, want exactly the admin.sock path and the test's memtool.sock", got)
	}
}

func TestPlantedFrames(t *testing.T) {
	dir := plant(t, map[string]string{
		"pkg/frame/frame.go":              "// Package frame frames.\npackage frame\n",
		"pkg/rpc/rpc.go":                  "// Package rpc talks.\npackage rpc\nimport _ \"example.com/m/pkg/frame\"\n",
		"cmd/brokerd/internal/b/b.go":     "// Package b writes its own frames.\npackage b\nimport _ \"example.com/m/pkg/frame\"\n",
		"cmd/loopd/internal/s/s_test.go":  "package s\nimport _ \"example.com/m/pkg/frame\"\n",
		"checks/sockettest/sockettest.go": "// Package sockettest frames by hand.\npackage sockettest\nimport _ \"example.com/m/pkg/frame\"\n",
	})
	got := Frames(dir)
	expect(t, got, "cmd/brokerd/internal/b/b.go: imports pkg/frame")
	expect(t, got, "checks/sockettest/sockettest.go: imports pkg/frame")
	if len(got) != 2 {
		t.Errorf("Frames = %q, want brokerd's and the harness's, not rpc's or a test's", got)
	}
}
