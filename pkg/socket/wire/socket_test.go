package wire

import (
	"strings"
	"testing"
)

// TestSockets: each socket's name is unique and is a file name, and a
// framed socket's interim answers are answers it can carry.
func TestSockets(t *testing.T) {
	names := map[string]bool{}
	for _, s := range Sockets {
		if names[s.Name] || !strings.HasSuffix(s.Name, ".sock") || strings.ContainsRune(s.Name, '/') || s.Server == "" {
			t.Errorf("socket %+v: want a unique file name ending .sock and its server", s)
		}
		names[s.Name] = true
		if s == &Infer {
			continue // not framed
		}
		if s.Requests == nil || s.Answers == nil || s.FrameMax <= 0 {
			t.Errorf("%s lacks its unions or frame cap", s.Name)
		}
		for _, tag := range s.Interim {
			if _, ok := s.Answers.New(tag); !ok {
				t.Errorf("%s: interim %q is no answer of the socket", s.Name, tag)
			}
		}
		if _, ok := s.Answers.New("error"); !ok {
			t.Errorf("%s cannot carry an error", s.Name)
		}
	}
}
