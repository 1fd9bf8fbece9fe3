package wire

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

// messages is every message type this package defines, by golden file
// name. A new type without a golden file fails TestGolden.
var messages = strict.NewUnion[strict.Variant]("type",
	func() strict.Variant { return new(Error) },
)

// unions is every message union this package defines. A message type
// without a golden file fails TestGolden, and so does a golden file that
// no union can decode.
var unions = map[string]*strict.Union[strict.Variant]{
	"messages": messages, "loop requests": LoopRequests, "loop events": LoopEvents, "broker": BrokerMessages, "memtool": MemtoolMessages, "memoryd": MemorydMessages,
}

// TestGolden is the wire spec: each golden file decodes strictly and
// re-encodes to the same bytes, and every message type has one.
func TestGolden(t *testing.T) {
	used := map[string]bool{}
	for name, u := range unions {
		for _, tag := range u.Tags() {
			t.Run(name+"/"+tag, func(t *testing.T) {
				file := filepath.Join("testdata", tag+".json")
				used[file] = true
				want, err := os.ReadFile(file)
				if err != nil {
					t.Fatalf("message %q has no golden file: %v", tag, err)
				}
				v, err := u.Decode(want)
				if err != nil {
					t.Fatalf("Decode(golden %s): %v", tag, err)
				}
				got, err := u.Encode(v)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("Encode(Decode(golden)) =\n%s\nwant\n%s", got, want)
				}
			})
		}
	}
	files, _ := filepath.Glob("testdata/*.json")
	for _, f := range files {
		if !used[f] {
			t.Errorf("%s is the golden file of no message type", f)
		}
	}
}

func TestLoopRefusals(t *testing.T) {
	for _, tt := range []struct {
		u   *strict.Union[strict.Variant]
		in  string
		err string
	}{
		{LoopRequests, `{"type":"answer","session":"s","text":"x"}`, "unknown type"},
		{LoopEvents, `{"type":"send","session":"s","text":"x"}`, "unknown type"},
		{LoopEvents, `{"type":"stopped","session":"s","reason":"bored","msg":""}`, "unknown stop reason"},
		{LoopRequests, `{"type":"send","session":"s"}`, "missing field"},
		{LoopRequests, `{"type":"send","Session":"s","text":"x"}`, "case differs"},
	} {
		if _, err := tt.u.Decode([]byte(tt.in)); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("Decode(%s) = %v, want %q", tt.in, err, tt.err)
		}
	}
	for _, id := range []string{"", "-x", "a/b", "..", "a b", strings.Repeat("a", 65), "thread\u00e9"} {
		if CheckSessionID(id) == nil {
			t.Errorf("CheckSessionID(%q) = nil", id)
		}
	}
	for _, id := range []string{"a", "thread-8f3a", "A_1", strings.Repeat("a", 64)} {
		if err := CheckSessionID(id); err != nil {
			t.Errorf("CheckSessionID(%q) = %v", id, err)
		}
	}
}

// TestKindsAppendOnly pins the kind list: shipped kinds may not be renamed,
// removed or reordered, only appended (then append to testdata/kinds.txt).
func TestKindsAppendOnly(t *testing.T) {
	b, err := os.ReadFile("testdata/kinds.txt")
	if err != nil {
		t.Fatal(err)
	}
	pinned := strings.Fields(string(b))
	if len(Kinds) < len(pinned) {
		t.Fatalf("Kinds has %d entries, %d were shipped", len(Kinds), len(pinned))
	}
	for i, k := range pinned {
		if string(Kinds[i]) != k {
			t.Errorf("Kinds[%d] = %q, shipped as %q", i, Kinds[i], k)
		}
	}
	if len(Kinds) != len(pinned) {
		t.Errorf("Kinds has new entries: append them to testdata/kinds.txt")
	}
}

func TestErrorRefusesUnknownKind(t *testing.T) {
	_, err := messages.Decode([]byte(`{"type":"error","op":"x","kind":"oops","msg":""}`))
	if err == nil || !strings.Contains(err.Error(), "unknown error kind") {
		t.Errorf("Decode(unknown kind) = %v", err)
	}
}

func TestErrorIsAndCauseStaysLocal(t *testing.T) {
	cause := errors.New("open /var/lib/secret-path: permission denied")
	e := &Error{Op: "decide", Kind: Internal, Msg: "audit write failed", Err: cause}
	var err error = fmt.Errorf("serve: %w", e)
	if !errors.Is(err, Internal) || errors.Is(err, Forbidden) {
		t.Errorf("errors.Is by kind is wrong for %v", err)
	}
	if !errors.Is(err, cause) {
		t.Error("the local cause is not reachable with errors.Is")
	}
	b, err := strict.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "secret-path") {
		t.Errorf("encoded error leaks its cause: %s", b)
	}
}

func TestMemorydRefusals(t *testing.T) {
	for _, tt := range []struct{ in, err string }{
		{`{"type":"memory_undo","file":"memory.md","extra":1}`, "unknown field"},
		{`{"type":"turn_done","session":"s","epoch":0}`, "missing field"},
		{`{"type":"turn_done","session":"s","epoch":0,"turn":1.5}`, ""},
		{`{"type":"identity_request","Session":"s","epoch":0}`, "case differs"},
		{`{"type":"send","session":"s","text":"x"}`, "unknown type"},
	} {
		if _, err := MemorydMessages.Decode([]byte(tt.in)); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("Decode(%s) = %v, want %q", tt.in, err, tt.err)
		}
	}
}

// No session can be named like the owner in memoryd's journal.
func TestOwnerSessionIsNoSessionID(t *testing.T) {
	if CheckSessionID(OwnerSession) == nil {
		t.Errorf("CheckSessionID(%q) = nil; a session could pose as the owner", OwnerSession)
	}
	if CheckSessionID("owner") != nil {
		t.Error(`"owner" is an ordinary session id`)
	}
}
