package toolargs

import (
	"strings"
	"testing"
)

// TestConsultArgs: question required, context optional, both capped,
// nothing else accepted; the container's call is https to
// /chat/completions with sane bounds.
func TestConsultArgs(t *testing.T) {
	a, err := Parse("consult", []byte(`{"question":"why?"}`))
	if err != nil || a.(Consult).Question != "why?" || a.(Consult).Context != "" {
		t.Fatalf("Parse = %+v, %v", a, err)
	}
	if b, _ := a.MarshalJSON(); string(b) != `{"question":"why?"}` {
		t.Errorf("wire form %s", b)
	}
	for _, raw := range []string{
		`{}`, `{"question":""}`, `{"question":"  "}`, `{"question":"q","history":"x"}`, `{"question":"q","Context":"x"}`,
		`{"question":"` + strings.Repeat("x", MaxConsultQuestion+1) + `"}`,
		`{"question":"q","context":"` + strings.Repeat("x", MaxConsultContext+1) + `"}`,
		`{"question":"a\u0000b"}`,
	} {
		if _, err := Parse("consult", []byte(raw)); err == nil {
			t.Errorf("Parse(%.60s) accepted", raw)
		}
	}
	ok := `{"url":"https://api.example.com/v1/chat/completions","body":"{}","idle_ms":1000,"total_ms":5000}`
	if _, err := ParseConsultCall([]byte(ok)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		strings.Replace(ok, "https", "http", 1),
		strings.Replace(ok, "/chat/completions", "/other", 1),
		strings.Replace(ok, `"body":"{}"`, `"body":""`, 1),
		strings.Replace(ok, `"idle_ms":1000`, `"idle_ms":9000`, 1),
		strings.Replace(ok, `"total_ms":5000`, `"total_ms":99999999`, 1),
	} {
		if _, err := ParseConsultCall([]byte(bad)); err == nil {
			t.Errorf("ParseConsultCall(%s) accepted", bad)
		}
	}
}
