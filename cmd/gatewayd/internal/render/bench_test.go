package render

import (
	"strings"
	"testing"
)

// BenchmarkAnswer20k renders a 20,000-rune answer with mentions and an
// image link, as a turn's answer is rendered before posting.
func BenchmarkAnswer20k(b *testing.B) {
	in := "@channel ![x](https://evil.example/a.png) " + strings.Repeat("word é 日本 ", 2000)
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		Answer(in)
	}
}

// BenchmarkApproval60k renders a 60 KB argument approval into parts.
func BenchmarkApproval60k(b *testing.B) {
	c := call(`{"body":"` + strings.Repeat("A", 60000) + `"}`)
	for b.Loop() {
		Approval(c, 8)
	}
}
