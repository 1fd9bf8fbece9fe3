package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestNoTCPListener: gatewayd opens no listening TCP port (the brief's
// network isolation, item 3). Its only listener is gateway.sock through
// package sockets, which listens on Unix sockets only; no source file of
// gatewayd may call a net or net/http listener.
func TestNoTCPListener(t *testing.T) {
	bad := regexp.MustCompile(`\b(net\.Listen\w*|http\.ListenAndServe\w*|http\.Serve\w*|httptest\.|\.ListenAndServe)\b`)
	err := filepath.Walk(".", func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if m := bad.Find(b); m != nil {
			t.Errorf("%s calls %s: gatewayd must not listen on the network", path, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
