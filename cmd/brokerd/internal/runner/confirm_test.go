package runner

import (
	"errors"
	"strings"
	"testing"
)

// TestConfirmWait: a code that came from Wait is taken only once an
// inspect finds the container exited, and then the inspect's code (and
// its OOM flag); Podman answers a failed wait with code 0, so a Wait of
// 0 on a container still running fails the call instead of passing for
// a clean exit. A code from an inspect needs nothing more.
func TestConfirmWait(t *testing.T) {
	never := func() (int32, bool, bool) { t.Error("an inspected code was inspected again"); return 0, false, false }
	if w, err := confirmWait(result{code: 3, inspected: true}, never); err != nil || w.code != 3 {
		t.Errorf("inspected: %+v, %v", w, err)
	}
	running := func() (int32, bool, bool) { return 0, false, false }
	if w, err := confirmWait(result{code: 0}, running); err == nil || !errors.Is(err, ErrPodman) || !strings.Contains(err.Error(), "has not exited") {
		t.Errorf("a wait of 0 on a running container = %+v, %v; want ErrPodman", w, err)
	}
	killed := func() (int32, bool, bool) { return 137, true, true }
	if w, err := confirmWait(result{code: 0}, killed); err != nil || w.code != 137 || !w.oom || !w.inspected {
		t.Errorf("a wait confirmed by the inspect = %+v, %v; want the inspect's 137 and OOM", w, err)
	}
}
