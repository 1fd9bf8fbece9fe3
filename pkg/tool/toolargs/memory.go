package toolargs

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// # The memory tools' arguments
//
// brokerd decides a memory tool (toolset.ClassMemory) by a rule built
// into it and passes the arguments on as one JSON object ([Memory]);
// memoryd, which runs the call, parses them with the functions below,
// and loopd's schemas for the three tools are tested against the same
// structs (cmd/loopd/internal/tools TestMemorySchemas):
//
//	recall      {"query": "text", "k": 5}   (k optional, 1 to MaxRecallK)
//	memory      {"action": "note|add|replace|remove|consolidate", "file": "memory|user", "text": "...", "old": "...", "plan": [{"op": "keep|rewrite|move|drop", "text": "..."}]}
//	            (which fields an action takes: [ParseMemoryEdit])
//	ask_memory  {"question": "text"}   (1 to MaxQuestion bytes, not blank)
//
// Their errors are one line for the model, without the tool's name:
// memoryd puts it in front.

// The memory tools' limits.
const (
	MaxRecallK     = 10   // hits one recall may ask for
	MaxRecallQuery = 1024 // bytes of a recall query
	MaxMemoryText  = 4096 // bytes of one memory write's text (or old)
	MaxQuestion    = 4096 // bytes of an ask_memory question
)

// Recall is recall's arguments: K is 0 when the call names none.
type Recall struct {
	Query string `json:"query"`
	K     int    `json:"k,omitempty"`
}

// ParseRecall decodes recall's arguments strictly and checks their bounds.
func ParseRecall(raw []byte) (Recall, error) {
	var a Recall
	if err := strict.Unmarshal(raw, &a); err != nil {
		return Recall{}, err
	}
	if a.K < 0 || a.K > MaxRecallK || len(a.Query) > MaxRecallQuery {
		return Recall{}, fmt.Errorf("k must be 1 to %d and the query at most %d bytes", MaxRecallK, MaxRecallQuery)
	}
	return a, nil
}

// MemoryEdit is the memory tool's arguments. Which fields an action
// takes is checked by [ParseMemoryEdit].
type MemoryEdit struct {
	Action string       `json:"action"`
	File   string       `json:"file,omitempty"` // "memory" or "user"
	Text   string       `json:"text,omitempty"`
	Old    string       `json:"old,omitempty"`
	Plan   []MemoryStep `json:"plan,omitempty"`
}

// MemoryStep is consolidate's decision for one entry, in file order:
// keep, rewrite (with Text), move (to notes, recallable) or drop.
type MemoryStep struct {
	Op   string `json:"op"`
	Text string `json:"text,omitempty"`
}

// memoryFields are the fields each action takes, exactly.
var memoryFields = map[string]string{"note": "text", "add": "file text", "replace": "file old text", "remove": "file old", "consolidate": "file plan"}

// ParseMemoryEdit decodes the memory tool's arguments strictly and checks
// that the action takes exactly the fields given, the file is one the
// agent may edit, and the text is within [MaxMemoryText]. The plan's
// steps are checked against the file by memoryd, which holds it.
func ParseMemoryEdit(raw []byte) (MemoryEdit, error) {
	var a MemoryEdit
	if err := strict.Unmarshal(raw, &a); err != nil {
		return MemoryEdit{}, err
	}
	fields, ok := memoryFields[a.Action]
	if !ok {
		return MemoryEdit{}, fmt.Errorf("action must be note, add, replace, remove or consolidate, not %q", a.Action)
	}
	has := map[string]bool{"file": a.File != "", "text": a.Text != "", "old": a.Old != "", "plan": a.Plan != nil}
	for _, f := range []string{"file", "text", "old", "plan"} {
		if need := strings.Contains(" "+fields+" ", " "+f+" "); need != has[f] {
			return MemoryEdit{}, fmt.Errorf("%s takes exactly the fields %s", a.Action, strings.ReplaceAll(fields, " ", ", "))
		}
	}
	if a.File != "" && a.File != "memory" && a.File != "user" {
		return MemoryEdit{}, errors.New(`file must be "memory" or "user" (soul.md is the owner's)`)
	}
	if len(a.Text) > MaxMemoryText || len(a.Old) > MaxMemoryText {
		return MemoryEdit{}, fmt.Errorf("text is over %d bytes", MaxMemoryText)
	}
	return a, nil
}

// AskMemory is ask_memory's arguments.
type AskMemory struct {
	Question string `json:"question"`
}

// ParseAskMemory decodes ask_memory's arguments strictly: one question,
// not blank, at most [MaxQuestion] bytes.
func ParseAskMemory(raw []byte) (AskMemory, error) {
	var a AskMemory
	if err := strict.Unmarshal(raw, &a); err != nil {
		return AskMemory{}, err
	}
	if strings.TrimSpace(a.Question) == "" || len(a.Question) > MaxQuestion {
		return AskMemory{}, fmt.Errorf("want {\"question\": \"...\"}, 1 to %d bytes", MaxQuestion)
	}
	return a, nil
}

// MemoryKeys lists the top-level keys a memory tool's arguments may hold
// and those they must (a field without omitempty), from the structs
// above: what loopd's schema for the tool must declare. False for a tool
// that is not a memory tool with arguments here.
func MemoryKeys(tool string) (all, required []string, ok bool) {
	var t reflect.Type
	switch tool {
	case toolset.Recall:
		t = reflect.TypeFor[Recall]()
	case toolset.Memory:
		t = reflect.TypeFor[MemoryEdit]()
	case toolset.AskMemory:
		t = reflect.TypeFor[AskMemory]()
	default:
		return nil, nil, false
	}
	for i := range t.NumField() {
		name, opts, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		all = append(all, name)
		if opts != "omitempty" {
			required = append(required, name)
		}
	}
	return all, required, true
}
