package toolargs

import (
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

func TestParseMemoryTools(t *testing.T) {
	long := strings.Repeat("x", MaxMemoryText+1)
	for _, tt := range []struct {
		tool, in, err string
	}{
		{toolset.Recall, `{"query":"tea"}`, ""},
		{toolset.Recall, `{"query":"tea","k":10}`, ""},
		{toolset.Recall, `{"query":"tea","k":11}`, "k must be 1 to 10"},
		{toolset.Recall, `{"query":"tea","k":-1}`, "k must be 1 to 10"},
		{toolset.Recall, `{"query":"` + strings.Repeat("q", MaxRecallQuery+1) + `"}`, "query at most 1024 bytes"},
		{toolset.Recall, `{"k":3}`, "query: missing field"},
		{toolset.Recall, `{"query":"a","limit":3}`, "limit: unknown field"},
		{toolset.Memory, `{"action":"note","text":"seen"}`, ""},
		{toolset.Memory, `{"action":"replace","file":"user","old":"a","text":"b"}`, ""},
		{toolset.Memory, `{"action":"consolidate","file":"memory","plan":[{"op":"keep"}]}`, ""},
		{toolset.Memory, `{"action":"note","file":"user","text":"x"}`, "note takes exactly the fields text"},
		{toolset.Memory, `{"action":"add","text":"x"}`, "add takes exactly the fields file, text"},
		{toolset.Memory, `{"action":"add","file":"soul","text":"x"}`, `file must be "memory" or "user"`},
		{toolset.Memory, `{"action":"delete"}`, `action must be note, add, replace, remove or consolidate, not "delete"`},
		{toolset.Memory, `{"action":"note","text":"` + long + `"}`, "text is over 4096 bytes"},
		{toolset.Memory, `{"action":"note","Text":"x"}`, "key case differs"},
		{toolset.AskMemory, `{"question":"what tea?"}`, ""},
		{toolset.AskMemory, `{"question":"  "}`, "1 to 4096 bytes"},
		{toolset.AskMemory, `{"question":"` + strings.Repeat("q", MaxQuestion+1) + `"}`, "1 to 4096 bytes"},
		{toolset.AskMemory, `{}`, "question: missing field"},
	} {
		var err error
		switch tt.tool {
		case toolset.Recall:
			_, err = ParseRecall([]byte(tt.in))
		case toolset.Memory:
			_, err = ParseMemoryEdit([]byte(tt.in))
		case toolset.AskMemory:
			_, err = ParseAskMemory([]byte(tt.in))
		}
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%s %.80s: err = %v, want %q", tt.tool, tt.in, err, tt.err)
		}
		// Whatever the parser accepts, brokerd's envelope accepts too.
		if err == nil {
			if _, perr := Parse(tt.tool, []byte(tt.in)); perr != nil {
				t.Errorf("Parse(%s, %s) = %v, but memoryd's parser accepts it", tt.tool, tt.in, perr)
			}
		}
	}
	if _, _, ok := MemoryKeys(toolset.ReadFile); ok {
		t.Error("MemoryKeys(read_file) answered for a tool that is not a memory tool")
	}
}
