package vm

import (
	"os"
	"testing"
)

// shared is the run's one guest, which the VM scenarios take in turn
// (shared.go); TestMain kills it once every test has run.
var shared Shared

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Close()
	os.Exit(code)
}
