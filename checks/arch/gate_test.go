package arch

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGateCatchesPlantedDefects runs the Makefile's own gate targets on a
// tiny planted module: each target must pass on clean code and fail on the
// defect it exists for. A gate step that always passes would show here.
func TestGateCatchesPlantedDefects(t *testing.T) {
	if testing.Short() {
		t.Skip("runs make, go vet, staticcheck and go test -race on planted modules")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is not installed; run checks/setup")
	}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	clean := "// Package p is clean.\npackage p\n\n// Add adds.\nfunc Add(a, b int) int { return a + b }\n"
	cleanTest := "package p\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(1, 2) != 3 {\n\t\tt.Fatal(\"bad\")\n\t}\n}\n"
	tests := []struct {
		target, name, file, body string
	}{
		{"fmt", "unformatted file", "p/bad.go", "package p\nfunc   Bad( ) {}\n"},
		{"vet", "printf mistake", "p/bad.go", "package p\n\nimport \"fmt\"\n\n// Bad is bad.\nfunc Bad() string { return fmt.Sprintf(\"%d\", \"x\") }\n"},
		{"staticcheck", "self-comparison", "p/bad.go", "package p\n\n// Bad is bad.\nfunc Bad(x int) bool { return x == x }\n"},
		{"race", "data race", "p/race_test.go", "package p\n\nimport \"testing\"\n\nfunc TestRace(t *testing.T) {\n\tx := 0\n\tdone := make(chan bool)\n\tgo func() { x++; done <- true }()\n\tx++\n\t<-done\n}\n"},
		{"race", "failing test", "p/fail_test.go", "package p\n\nimport \"testing\"\n\nfunc TestFail(t *testing.T) { t.Fatal(\"planted\") }\n"},
	}
	run := func(dir, target string) ([]byte, error) {
		cmd := exec.Command("make", "--no-print-directory", "-C", dir, target)
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
		return cmd.CombinedOutput()
	}
	base := func(t *testing.T) string {
		return plant(t, map[string]string{"Makefile": string(makefile), "p/p.go": clean, "p/p_test.go": cleanTest})
	}
	for _, target := range []string{"fmt", "vet", "staticcheck", "race"} {
		if out, err := run(base(t), target); err != nil {
			t.Fatalf("make %s fails on clean code: %v\n%s", target, err, out)
		}
	}
	for _, tt := range tests {
		t.Run(tt.target+"/"+tt.name, func(t *testing.T) {
			dir := base(t)
			if err := os.WriteFile(filepath.Join(dir, tt.file), []byte(tt.body), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := run(dir, tt.target); err == nil {
				t.Errorf("make %s passed with a planted %s:\n%s", tt.target, tt.name, out)
			}
		})
	}
}
