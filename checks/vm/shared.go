package vm

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fresh is the snapshot [Shared.Use] takes of the shared guest just
// after its boot: systemd up, nothing done yet.
const Fresh = "fresh"

// RestoreTimeout bounds one savevm or loadvm: a few hundred megabytes
// of guest memory written to or read from the disk's overlay.
const RestoreTimeout = 10 * time.Minute

// SettleTimeout bounds the wait for the guest to idle before a snapshot.
const SettleTimeout = 2 * time.Minute

// Shared is one guest a `go test` run boots once and its scenarios take
// in turn, each from a named snapshot of it ([Machine.Save]): [Fresh],
// or one a scenario's preparation made (the installed deployment), so
// one boot and one install serve every scenario and no scenario sees
// what an earlier one left.
//
// # Invariant
//
// A scenario gets the guest exactly as its snapshot holds it: after
// each restore, the guest's [Fingerprint] (units, users and groups,
// files of the system's writable trees, processes, mounts, network links)
// must equal the one taken when the snapshot was saved, or the scenario
// fails before it starts. What a scenario changes is logged when it ends
// and undone by the next restore. Scenarios take the guest one at a time
// (no t.Parallel): a second [Shared.Use] while one holds it fails.
type Shared struct {
	mu     sync.Mutex
	m      *Machine
	failed string           // why the boot failed, for the scenarios after
	snaps  map[string]*snap // saved snapshots, and ones that failed to make
	holder string           // the test using the guest now, or ""
	at     string           // the snapshot the guest is still untouched at, or ""
	from   string           // the snapshot the holder started from
}

type snap struct {
	print    Fingerprint
	volatile map[string]bool // "section: line"s that came and went while it was saved
	failed   string          // why it could not be made, for the scenarios after
}

// Use gives t the shared guest as snapshot name holds it, booting the
// guest first if this run has not, and making the snapshot first if no
// scenario has: from [Fresh], setup runs with t (its failures are t's)
// and the result is saved as name. The guest is t's until t ends; a
// scenario needing another name than Fresh passes the setup that makes
// it.
func (s *Shared) Use(t *testing.T, name string, setup func(t *testing.T, m *Machine)) *Machine {
	t.Helper()
	mayBoot(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holder != "" {
		t.Fatalf("vm: the shared guest is %s's until it ends: scenarios take it in turn (no t.Parallel)", s.holder)
	}
	if s.failed != "" {
		t.Fatalf("vm: the shared guest did not boot in %s; see its log", s.failed)
	}
	if s.snaps == nil {
		s.snaps = map[string]*snap{}
	}
	s.holder = t.Name()
	t.Cleanup(func() { s.release(t) })
	if s.m == nil {
		ok := false
		defer func() {
			if !ok {
				s.failed = t.Name()
			}
		}()
		s.m = boot(t)
		s.save(t, Fresh)
		ok = true
	}
	if sn := s.snaps[name]; sn == nil {
		if setup == nil {
			t.Fatalf("vm: no snapshot %q of the shared guest, and nothing to make it", name)
		}
		s.restore(t, Fresh)
		s.at = ""
		ok := false
		defer func() {
			if !ok {
				s.snaps[name] = &snap{failed: t.Name()}
			}
		}()
		began := time.Now()
		setup(t, s.m)
		if t.Failed() {
			t.FailNow()
		}
		s.save(t, name)
		ok = true
		t.Logf("vm: made the shared guest's snapshot %q in %v", name, time.Since(began).Round(time.Second))
	} else if sn.failed != "" {
		t.Fatalf("vm: the shared guest's snapshot %q could not be made in %s; see its log", name, sn.failed)
	} else {
		s.restore(t, name)
	}
	s.at, s.from = "", name
	return s.m
}

// save snapshots the guest as name, with its fingerprint, once the
// guest idles: two fingerprints 3 s apart agree (waiting at most
// [SettleTimeout]). If the guest never idles, the lines that differed
// between the last two (a worker that comes and goes, a unit's periodic
// check) are left out of the restore check: they differ without any
// scenario, so they cannot tell a restore that failed.
func (s *Shared) save(t *testing.T, name string) {
	t.Helper()
	fp := Print(t, s.m)
	volatile := map[string]bool{}
	for settle := time.Now().Add(SettleTimeout); ; {
		time.Sleep(3 * time.Second)
		last := fp
		fp = Print(t, s.m)
		diff := Diff(last, fp)
		if len(diff) == 0 {
			break
		}
		if time.Now().After(settle) {
			for _, d := range diff {
				volatile[d[2:]] = true
			}
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), RestoreTimeout)
	defer cancel()
	began := time.Now()
	if err := s.m.Save(ctx, name); err != nil {
		t.Fatalf("vm: save the shared guest as %q: %v", name, err)
	}
	s.snaps[name] = &snap{print: fp, volatile: volatile}
	s.at = name
	t.Logf("vm: saved the shared guest as %q in %v (%d fingerprint lines)", name, time.Since(began).Round(time.Millisecond), fp.Len())
	if len(volatile) > 0 {
		var k []string
		for l := range volatile {
			k = append(k, l)
		}
		sort.Strings(k)
		t.Logf("vm: the guest did not idle within %v; %d lines that changed meanwhile are left out of %q's restore check:\n%s", SettleTimeout, len(k), name, strings.Join(k, "\n"))
	}
}

// restore brings the guest back to snapshot name and holds it to the
// fingerprint taken when it was saved.
func (s *Shared) restore(t *testing.T, name string) {
	t.Helper()
	if s.at == name {
		return // nothing has touched it since the save
	}
	ctx, cancel := context.WithTimeout(context.Background(), RestoreTimeout)
	defer cancel()
	began := time.Now()
	if err := s.m.Restore(ctx, name); err != nil {
		t.Fatalf("vm: restore the shared guest to %q: %v", name, err)
	}
	var diff []string
	for _, d := range Diff(s.snaps[name].print, Print(t, s.m)) {
		if !s.snaps[name].volatile[d[2:]] {
			diff = append(diff, d)
		}
	}
	if len(diff) > 0 {
		t.Fatalf("vm: the shared guest restored to %q is not as it was saved:\n%s", name, strings.Join(diff, "\n"))
	}
	s.at = name
	t.Logf("vm: restored the shared guest to %q in %v, its fingerprint as saved", name, time.Since(began).Round(time.Millisecond))
}

// release ends t's turn, logging what it left changed (the next
// restore undoes it).
func (s *Shared) release(t *testing.T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holder = ""
	if s.m == nil || s.at != "" {
		return
	}
	// A scenario whose channel broke leaves nothing to fingerprint; the
	// next restore still replaces the whole guest.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	fp, err := fingerprint(ctx, s.m)
	if err != nil {
		t.Logf("vm: fingerprint after the scenario: %v", err)
		return
	}
	diff := Diff(s.snaps[s.from].print, fp)
	n := len(diff)
	const show = 30
	more := ""
	if len(diff) > show {
		more = fmt.Sprintf("\n... and %d more", len(diff)-show)
		diff = diff[:show]
	}
	t.Logf("vm: the scenario left %d changes from %q (the next restore undoes them):\n%s%s", n, s.from, strings.Join(diff, "\n"), more)
}

// Close kills the shared guest, if it was booted.
func (s *Shared) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m != nil {
		s.m.Close()
	}
}

// Fingerprint is what a scenario could leave changed in the guest, by
// section ("units", "users", "files", "processes", "mounts", "links"),
// each a sorted list of lines.
type Fingerprint map[string][]string

// Len is the number of lines in all sections.
func (f Fingerprint) Len() int {
	n := 0
	for _, l := range f {
		n += len(l)
	}
	return n
}

// fingerprintScript prints each section under a "== name" line. Files
// are listed with type, mode, owner and size, not times or contents: a
// restore puts back the same bytes, and the list catches a file a
// scenario added, removed, grew or chmodded. Processes exclude the
// kernel's threads, the script's own process group and udev's workers
// (which linger a while after boot and after a device event, then go).
const fingerprintScript = `export LC_ALL=C
echo '== units'
systemctl list-units --all --plain --full --no-legend --no-pager | sed 's/^[^a-zA-Z0-9_@.-]* *//' | awk '{print $1, $2, $3, $4}' | sort
echo '== users'
getent passwd | cut -d: -f1,3,4,6,7 | sort
getent group | cut -d: -f1,3,4 | sed 's/^/group /' | sort
echo '== files'
find /etc /usr/local /srv /root /home /opt /var/lib /var/tmp /tmp -xdev \
  \( -path /var/lib/systemd/timers -o -path /var/lib/systemd/random-seed -o -path /var/lib/systemd/timesync \) -prune \
  -o -printf '%p %y %m %u:%g %s\n' 2>/dev/null | sort
ls -1 /run/credentials 2>/dev/null | sed 's|^|/run/credentials/|'
echo '== processes'
me=$(ps -o pgid= -p $$ | tr -d ' ')
ps -e -o pid=,ppid=,pgid=,user:32=,comm= | awk -v me="$me" '$1 != 2 && $2 != 2 && $3 != me && $5 != "(udev-worker)" {print $4, $5}' | sort
echo '== mounts'
awk '{print $2, $3}' /proc/mounts | sort
echo '== links'
ip -o link | awk -F': ' '{print $2}' | sort
`

// Print takes the guest's fingerprint, failing t if it cannot.
func Print(t testing.TB, m *Machine) Fingerprint {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f, err := fingerprint(ctx, m)
	if err != nil {
		t.Fatalf("vm: %v", err)
	}
	return f
}

func fingerprint(ctx context.Context, m *Machine) (Fingerprint, error) {
	r, err := m.Sh(ctx, fingerprintScript)
	if err != nil {
		return nil, fmt.Errorf("fingerprint the guest: %w", err)
	}
	if r.Exit != 0 {
		return nil, fmt.Errorf("fingerprint the guest: %s", r)
	}
	return ParseFingerprint(r.Stdout), nil
}

// ParseFingerprint reads the fingerprint script's output: lines under a
// "== name" heading belong to that section; each section is sorted.
func ParseFingerprint(out string) Fingerprint {
	f := Fingerprint{}
	section := ""
	for _, l := range strings.Split(out, "\n") {
		if name, ok := strings.CutPrefix(l, "== "); ok {
			section = name
			f[section] = f[section][:0:0]
			continue
		}
		if l != "" && section != "" {
			f[section] = append(f[section], l)
		}
	}
	for _, l := range f {
		sort.Strings(l)
	}
	return f
}

// Diff lists what differs from a to b, one line each: "+ section: line"
// for what b has and a lacks, "- section: line" for the reverse, by
// section name and then line.
func Diff(a, b Fingerprint) []string {
	var names []string
	for n := range a {
		names = append(names, n)
	}
	for n := range b {
		if _, ok := a[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var out []string
	for _, n := range names {
		count := map[string]int{}
		for _, l := range a[n] {
			count[l]--
		}
		for _, l := range b[n] {
			count[l]++
		}
		var lines []string
		for l, c := range count {
			for ; c > 0; c-- {
				lines = append(lines, "+ "+n+": "+l)
			}
			for ; c < 0; c++ {
				lines = append(lines, "- "+n+": "+l)
			}
		}
		sort.Slice(lines, func(i, j int) bool {
			if lines[i][2:] != lines[j][2:] {
				return lines[i][2:] < lines[j][2:]
			}
			return lines[i] < lines[j]
		})
		out = append(out, lines...)
	}
	return out
}
