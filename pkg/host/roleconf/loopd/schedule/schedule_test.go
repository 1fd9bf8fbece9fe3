package schedule

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

// oracle is a brute-force reading of a cron line, written from the
// documented rules without the parser's code: it expands each field to
// the set of values it names and tests a time field by field.
type oracle struct {
	vals [5]map[int]bool
	star [5]bool
}

func newOracle(t *testing.T, src string) oracle {
	t.Helper()
	var o oracle
	for i, f := range strings.Fields(src) {
		r := cronFields[i]
		o.vals[i] = map[int]bool{}
		o.star[i] = f == "*"
		for _, item := range strings.Split(f, ",") {
			body, step := item, 1
			if b, s, ok := strings.Cut(item, "/"); ok {
				body = b
				step, _ = strconv.Atoi(s)
			}
			lo, hi := r.min, r.max
			if a, b, ok := strings.Cut(body, "-"); ok {
				lo, _ = strconv.Atoi(a)
				hi, _ = strconv.Atoi(b)
			} else if body != "*" {
				lo, _ = strconv.Atoi(body)
				if !strings.Contains(item, "/") {
					hi = lo
				}
			}
			for v := lo; v <= hi; v += step {
				o.vals[i][v] = true
			}
		}
	}
	return o
}

func (o oracle) matches(t time.Time) bool {
	if !o.vals[0][t.Minute()] || !o.vals[1][t.Hour()] || !o.vals[3][int(t.Month())] {
		return false
	}
	dom, dow := o.vals[2][t.Day()], o.vals[4][int(t.Weekday())]
	if !o.star[2] && !o.star[4] {
		return dom || dow
	}
	return dom && dow
}

// randomField writes a random valid field for r.
func randomField(rng *rand.Rand, r fieldRange) string {
	n := r.max - r.min + 1
	item := func() string {
		switch rng.IntN(5) {
		case 0:
			return strconv.Itoa(r.min + rng.IntN(n))
		case 1:
			a := r.min + rng.IntN(n)
			b := a + rng.IntN(r.max-a+1)
			return strconv.Itoa(a) + "-" + strconv.Itoa(b)
		case 2:
			return "*/" + strconv.Itoa(1+rng.IntN(n))
		case 3:
			a := r.min + rng.IntN(n)
			return strconv.Itoa(a) + "/" + strconv.Itoa(1+rng.IntN(n))
		default:
			a := r.min + rng.IntN(n)
			b := a + rng.IntN(r.max-a+1)
			return strconv.Itoa(a) + "-" + strconv.Itoa(b) + "/" + strconv.Itoa(1+rng.IntN(n))
		}
	}
	if rng.IntN(3) == 0 {
		return "*"
	}
	parts := []string{item()}
	for rng.IntN(3) == 0 {
		parts = append(parts, item())
	}
	return strings.Join(parts, ",")
}

// TestCronAgainstOracle: for random cron lines and random start times,
// Next is exactly the first minute after the start that the brute-force
// oracle accepts, found by walking minute by minute.
func TestCronAgainstOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 5))
	// The walk is bounded; lines that fire rarely are skipped when the
	// walk ends without a match (they are covered by the explicit cases).
	const walk = 3 * 366 * 24 * 60
	checked := 0
	for i := 0; i < 400; i++ {
		var fields []string
		for _, r := range cronFields {
			fields = append(fields, randomField(rng, r))
		}
		if rng.IntN(2) == 0 {
			fields[0] = strconv.Itoa(rng.IntN(60)) // most real lines fix the minute
		}
		src := strings.Join(fields, " ")
		s, err := ParseCron(src)
		o := newOracle(t, src)
		start := time.Date(2026+rng.IntN(4), time.Month(1+rng.IntN(12)), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60), 0, time.UTC)
		var want time.Time
		for m, c := 0, start.Truncate(time.Minute).Add(time.Minute); m < walk; m, c = m+1, c.Add(time.Minute) {
			if o.matches(c) {
				want = c
				break
			}
		}
		if err != nil {
			if !want.IsZero() {
				t.Errorf("ParseCron(%q) = %v, but the oracle finds %v", src, err, want)
			}
			continue
		}
		got, ok := s.Next(start)
		if want.IsZero() {
			continue
		}
		checked++
		if !ok || !got.Equal(want) {
			t.Errorf("ParseCron(%q).Next(%v) = %v, %v; want %v", src, start, got, ok, want)
		}
	}
	if checked < 300 {
		t.Errorf("only %d lines checked against the oracle", checked)
	}
}

func TestCronCases(t *testing.T) {
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	for _, tc := range []struct{ src, from, want string }{
		{"0 7 * * 1-5", "2026-12-04T07:00:00Z", "2026-12-07T07:00:00Z"}, // Friday to Monday
		{"*/15 * * * *", "2026-12-01T10:07:59Z", "2026-12-01T10:15:00Z"},
		{"0 0 29 2 *", "2026-03-01T00:00:00Z", "2028-02-29T00:00:00Z"},
		{"0 12 13 * 5", "2026-12-01T00:00:00Z", "2026-12-04T12:00:00Z"}, // either day field
		{"30 9 1 1 *", "2026-12-01T00:00:00Z", "2027-01-01T09:30:00Z"},
		{"5/20 * * * *", "2026-12-01T10:26:00Z", "2026-12-01T10:45:00Z"},
	} {
		s, err := ParseCron(tc.src)
		if err != nil {
			t.Fatalf("ParseCron(%q) = %v", tc.src, err)
		}
		if got, ok := s.Next(at(tc.from)); !ok || !got.Equal(at(tc.want)) {
			t.Errorf("ParseCron(%q).Next(%s) = %v, %v; want %s", tc.src, tc.from, got, ok, tc.want)
		}
	}
}

func TestScheduleRefusals(t *testing.T) {
	for _, src := range []string{"", "* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *",
		"* * * * 7", "* * * * mon", "@daily", "5-1 * * * *", "*/0 * * * *", "1,,2 * * * *", "0 0 31 2 *", "0 0 30,31 2 *", "-1 * * * *", "+1 * * * *", "001 * * * *"} {
		if _, err := ParseCron(src); err == nil {
			t.Errorf("ParseCron(%q) = nil error, want a refusal", src)
		}
	}
	for _, src := range []string{"", "m", "0m", "30s", "1w", "1.5h", "-1h", "+1h", "01h", "367d", "99999999m"} {
		if _, err := ParseEvery(src); err == nil {
			t.Errorf("ParseEvery(%q) = nil error, want a refusal", src)
		}
	}
	for _, src := range []string{"", "tomorrow", "2026-12-01", "2026-12-01 09:00:00", "1999-12-31T23:59:59Z"} {
		if _, err := ParseAt(src); err == nil {
			t.Errorf("ParseAt(%q) = nil error, want a refusal", src)
		}
	}
}

func TestEveryAndAt(t *testing.T) {
	s, err := ParseEvery("2h")
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	if got, _ := s.Next(from); !got.Equal(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("every 2h after 09:30 = %v, want 10:00 (counted from the Unix epoch)", got)
	}
	if s.String() != "every 2h" {
		t.Errorf("String = %q", s.String())
	}
	a, err := ParseAt("2026-12-24T09:00:00+01:00")
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := a.Next(from); !ok || !got.Equal(time.Date(2026, 12, 24, 8, 0, 0, 0, time.UTC)) {
		t.Errorf("at.Next = %v %v", got, ok)
	}
	if _, ok := a.Next(time.Date(2026, 12, 24, 8, 0, 0, 0, time.UTC)); ok {
		t.Error("an at schedule fires again after its time")
	}
}

// FuzzSchedule: no input makes a parser panic or accept a schedule that
// cannot fire, and an accepted one always names a later time.
func FuzzSchedule(f *testing.F) {
	for _, s := range []string{"0 7 * * 1-5", "*/15 * * * *", "5/20 1,2,3-9/2 * * *", "15m", "1d", "2026-12-24T09:00:00Z", "0 0 31 2 *"} {
		f.Add(s)
	}
	from := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, src string) {
		for _, parse := range []func(string) (Schedule, error){ParseCron, ParseEvery, ParseAt} {
			s, err := parse(src)
			if err != nil {
				continue
			}
			if s.kind == kindAt {
				continue // fires once, possibly in the past
			}
			next, ok := s.Next(from)
			if !ok || !next.After(from) {
				t.Fatalf("%q parsed but Next(%v) = %v, %v", src, from, next, ok)
			}
			if next.Second() != 0 {
				t.Fatalf("%q: Next is not on a minute: %v", src, next)
			}
		}
	})
}
