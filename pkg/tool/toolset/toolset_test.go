package toolset

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestList pins the list: the tools array's order and each class, which
// loopd, brokerd and the toolkit all read from here.
func TestList(t *testing.T) {
	for _, tt := range []struct {
		name string
		got  []string
		want []string
	}{
		{"core", Core(), []string{"clock", "find_tool", "call_tool", "recall", "memory"}},
		{"granted", Of(ClassGranted), []string{"read_file", "write_file", "shell", "http_fetch", "consult", "read_attachment", "post_file"}},
		{"memory", Of(ClassMemory), []string{"recall", "ask_memory", "memory"}},
		{"local", Of(ClassLocal), []string{"clock", "find_tool"}},
		{"meta", Of(ClassMeta), []string{"call_tool"}},
	} {
		assert.Equal(t, tt.want, tt.got, tt.name)
	}
	n := Names()
	assert.Len(t, slices.Compact(slices.Sorted(slices.Values(n))), len(All), "Names() = %q: every tool once", n)
}

func TestPredicates(t *testing.T) {
	tests := []struct {
		name                    string
		granted, memory, inCore bool
	}{
		{"read_file", true, false, false},
		{"shell", true, false, false},
		{"consult", true, false, false},
		{"read_attachment", true, false, false},
		{"post_file", true, false, false},
		{"recall", false, true, true},
		{"ask_memory", false, true, false},
		{"memory", false, true, true},
		{"call_tool", false, false, true},
		{"clock", false, false, true},
		{"grep", false, false, false},
		{"", false, false, false},
		{"Read_File", false, false, false},
	}
	for _, tt := range tests {
		if IsGranted(tt.name) != tt.granted || IsMemory(tt.name) != tt.memory || IsCore(tt.name) != tt.inCore {
			t.Errorf("%q: IsGranted %v IsMemory %v IsCore %v; want %v %v %v", tt.name,
				IsGranted(tt.name), IsMemory(tt.name), IsCore(tt.name), tt.granted, tt.memory, tt.inCore)
		}
	}
}
