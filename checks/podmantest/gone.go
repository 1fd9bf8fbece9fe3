package podmantest

import (
	"strings"
	"time"
)

// Remaining waits until `podman ps -a -q` with args (filters) lists no
// container, looking every 50 ms for at most 10 s, and returns what is
// still listed then (nil once none is). brokerd removes a call's
// container just after its answer, so a whole-stack test that checks for
// leftovers waits for that removal, bounded, rather than sleeping.
func (s *Service) Remaining(args ...string) ([]string, error) {
	argv := append([]string{"ps", "-a", "-q"}, args...)
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, err := s.CLI(nil, argv...)
		if err != nil {
			return nil, err
		}
		if left := strings.Fields(out); len(left) == 0 || time.Now().After(end) {
			return left, nil
		}
	}
}
