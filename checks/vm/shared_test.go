package vm

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestSharedGuestCatchesLeftovers plants a scenario that leaves the
// shared guest changed in every way the fingerprint looks at (a file, a
// running unit and its process, a user, a mount, a network link) and
// wants the fingerprint to show each change, and the next scenario to
// get the guest back as its snapshot holds it: restored, with none of
// them, and its fingerprint the saved one (Shared.Use fails the scenario
// otherwise).
func TestSharedGuestCatchesLeftovers(t *testing.T) {
	const plant = `set -e
mkdir -p /var/lib/bx-leftover && echo left >/var/lib/bx-leftover/file
systemd-run --quiet --unit=bx-leftover /bin/sleep 900
useradd --system --no-create-home bx-leftover
mkdir -p /mnt/bx-leftover && mount -t tmpfs bx-leftover /mnt/bx-leftover
ip link add bx-leftover type dummy`
	want := []string{
		"+ files: /var/lib/bx-leftover/file f 644 root:root 5",
		"+ units: bx-leftover.service loaded active running",
		"+ users: bx-leftover:",
		"+ processes: root sleep",
		"+ mounts: /mnt/bx-leftover tmpfs",
		"+ links: bx-leftover",
	}
	ok := t.Run("leaves changes", func(t *testing.T) {
		m := shared.Use(t, Fresh, nil)
		g := guest{m}
		g.must(t, plant)
		diff := Diff(shared.snaps[Fresh].print, Print(t, m))
		for _, w := range want {
			found := false
			for _, d := range diff {
				found = found || strings.HasPrefix(d, w)
			}
			if !found {
				t.Errorf("the fingerprint does not show %q; it shows:\n%s", w, strings.Join(diff, "\n"))
			}
		}
	})
	if !ok {
		t.FailNow()
	}
	t.Run("next scenario", func(t *testing.T) {
		m := shared.Use(t, Fresh, nil)
		g := guest{m}
		if d := Diff(shared.snaps[Fresh].print, Print(t, m)); len(d) > 0 {
			t.Errorf("the next scenario's guest differs from %q:\n%s", Fresh, strings.Join(d, "\n"))
		}
		for _, check := range []string{
			"test -e /var/lib/bx-leftover",
			"systemctl is-active --quiet bx-leftover.service",
			"getent passwd bx-leftover",
			"pgrep -x sleep",
			"grep -q ' /mnt/bx-leftover ' /proc/mounts",
			"ip link show bx-leftover",
		} {
			if r := g.sh(t, time.Minute, check); r.Exit == 0 {
				t.Errorf("the next scenario's guest still has what the last left: %s (%s)", check, r)
			}
		}
	})
}

// TestFingerprintDiff holds the comparison the shared guest's restore
// check rests on: any line added or removed in any section shows, with
// its section; duplicates count; order does not matter.
func TestFingerprintDiff(t *testing.T) {
	base := ParseFingerprint("== units\nb.service loaded active running\na.service loaded active running\n== processes\nroot sleep\nroot sleep\n== files\n/etc/x f 644 root:root 3\n")
	for _, c := range []struct {
		name string
		out  string
		want []string
	}{
		{"same, other order", "== files\n/etc/x f 644 root:root 3\n== processes\nroot sleep\nroot sleep\n== units\na.service loaded active running\nb.service loaded active running\n", nil},
		{"unit stopped", "== units\nb.service loaded inactive dead\na.service loaded active running\n== processes\nroot sleep\nroot sleep\n== files\n/etc/x f 644 root:root 3\n",
			[]string{"- units: b.service loaded active running", "+ units: b.service loaded inactive dead"}},
		{"one process fewer", "== units\nb.service loaded active running\na.service loaded active running\n== processes\nroot sleep\n== files\n/etc/x f 644 root:root 3\n",
			[]string{"- processes: root sleep"}},
		{"file grown, section added", "== units\nb.service loaded active running\na.service loaded active running\n== processes\nroot sleep\nroot sleep\n== files\n/etc/x f 644 root:root 4\n== links\nbx0\n",
			[]string{"- files: /etc/x f 644 root:root 3", "+ files: /etc/x f 644 root:root 4", "+ links: bx0"}},
		{"section gone", "== units\nb.service loaded active running\na.service loaded active running\n== processes\nroot sleep\nroot sleep\n",
			[]string{"- files: /etc/x f 644 root:root 3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Diff(base, ParseFingerprint(c.out)); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Diff = %q, want %q", got, c.want)
			}
		})
	}
}
