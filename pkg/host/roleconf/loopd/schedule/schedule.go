// Package schedule is when a job runs: the cron, every and at schedules
// of the owner's job files (loopd's package jobs) and of loopd.toml's
// [jobs] tiering, parsed by the one parser loopd and `bxctl doctor` run.
//
// Invariant: a parse function returns only a schedule that can fire; the
// zero Schedule never fires.
package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A Schedule says when a job runs. It is one of three kinds, each parsed
// from the job file's one schedule key:
//
//   - cron: five fields, minute hour day-of-month month day-of-week, in
//     UTC. A field is "*", or a comma-separated list of items, each a
//     number, a range "a-b", or either followed by a step "/n" ("*/n"
//     is every n-th value from the field's first). Day of week is 0 to 6,
//     Sunday 0 (7 is not accepted). As in Vixie cron, when both day
//     fields are restricted a day matches if either does. No names
//     ("mon", "jan"), no "@daily", no "L", "W", "#" or "?".
//   - every: a whole number of minutes, hours or days ("15m", "2h",
//     "1d"), at least one minute and at most 366 days, counted from the
//     Unix epoch (so "1h" runs on the hour, UTC).
//   - at: one RFC 3339 time; the job runs once.
//
// The zero Schedule never fires. Parse functions return only schedules
// that can fire.
type Schedule struct {
	kind  int
	cron  cron
	every time.Duration
	at    time.Time
}

const (
	kindCron = iota + 1
	kindEvery
	kindAt
)

// String is the schedule as the owner wrote it, normalised.
func (s Schedule) String() string {
	switch s.kind {
	case kindCron:
		return "cron " + s.cron.src
	case kindEvery:
		return "every " + formatEvery(s.every)
	case kindAt:
		return "at " + s.at.UTC().Format(time.RFC3339)
	}
	return "never"
}

// Next is the first time strictly after t at which the schedule fires,
// on a whole minute (an at schedule's own time, to the second), and
// whether there is one.
func (s Schedule) Next(t time.Time) (time.Time, bool) {
	t = t.UTC()
	switch s.kind {
	case kindCron:
		return s.cron.next(t)
	case kindEvery:
		n := t.Unix()/int64(s.every/time.Second) + 1
		return time.Unix(n*int64(s.every/time.Second), 0).UTC(), true
	case kindAt:
		if s.at.After(t) {
			return s.at, true
		}
	}
	return time.Time{}, false
}

// MaxSchedule caps the schedule string.
const MaxSchedule = 128

// ParseCron parses the cron subset described at [Schedule].
func ParseCron(src string) (Schedule, error) {
	if len(src) > MaxSchedule {
		return Schedule{}, fmt.Errorf("cron %q: longer than %d bytes", src[:32]+"…", MaxSchedule)
	}
	fields := strings.Fields(src)
	if len(fields) != 5 {
		return Schedule{}, fmt.Errorf("cron %q: want 5 fields (minute hour day-of-month month day-of-week), got %d", src, len(fields))
	}
	var c cron
	for i, f := range fields {
		set, star, err := parseField(f, cronFields[i])
		if err != nil {
			return Schedule{}, fmt.Errorf("cron %q: %s: %v", src, cronFields[i].name, err)
		}
		c.sets[i], c.star[i] = set, star
	}
	if !c.possible() {
		return Schedule{}, fmt.Errorf("cron %q: no date has that day of the month in those months, so it never runs", src)
	}
	c.src = strings.Join(fields, " ")
	return Schedule{kind: kindCron, cron: c}, nil
}

// ParseEvery parses an every schedule: a whole number and a unit, m, h
// or d.
func ParseEvery(src string) (Schedule, error) {
	if len(src) < 2 || len(src) > 8 {
		return Schedule{}, fmt.Errorf("every %q: want a whole number and a unit (15m, 2h, 1d)", src)
	}
	unit := map[byte]time.Duration{'m': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}[src[len(src)-1]]
	n, err := strconv.ParseUint(src[:len(src)-1], 10, 32)
	if unit == 0 || err != nil || src[0] == '+' || (len(src) > 2 && src[0] == '0') {
		return Schedule{}, fmt.Errorf("every %q: want a whole number and a unit (15m, 2h, 1d)", src)
	}
	d := time.Duration(n) * unit
	if d < time.Minute || d > 366*24*time.Hour {
		return Schedule{}, fmt.Errorf("every %q: must be at least 1m and at most 366d", src)
	}
	return Schedule{kind: kindEvery, every: d}, nil
}

// ParseAt parses an at schedule: one RFC 3339 time.
func ParseAt(src string) (Schedule, error) {
	t, err := time.Parse(time.RFC3339, src)
	if err != nil {
		return Schedule{}, fmt.Errorf("at %q: want an RFC 3339 time such as 2026-12-24T09:00:00Z", src)
	}
	if t.Year() < 2000 || t.Year() > 9999 {
		return Schedule{}, fmt.Errorf("at %q: the year must be 2000 to 9999", src)
	}
	return Schedule{kind: kindAt, at: t.UTC().Truncate(time.Second)}, nil
}

func formatEvery(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	}
	return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
}

// cron is a parsed five-field schedule: sets[i] has bit v set when value
// v matches field i; star[i] says the field was "*" (for the day rule).
type cron struct {
	src  string
	sets [5]uint64
	star [5]bool
}

type fieldRange struct {
	name     string
	min, max int
}

var cronFields = [5]fieldRange{{"minute", 0, 59}, {"hour", 0, 23}, {"day of month", 1, 31}, {"month", 1, 12}, {"day of week", 0, 6}}

var errItem = errors.New("want *, a number, a range a-b, a list of them, or any of these with /step")

func parseField(f string, r fieldRange) (set uint64, star bool, err error) {
	if f == "*" {
		return span(r.min, r.max, 1), true, nil
	}
	for item := range strings.SplitSeq(f, ",") {
		body, stepText, stepped := strings.Cut(item, "/")
		step := 1
		if stepped {
			if step, err = number(stepText, 1, r.max-r.min+1); err != nil {
				return 0, false, fmt.Errorf("step %q: %v", stepText, err)
			}
		}
		lo, hi := r.min, r.max
		switch a, b, isRange := strings.Cut(body, "-"); {
		case body == "*":
		case isRange:
			if lo, err = number(a, r.min, r.max); err != nil {
				return 0, false, err
			}
			if hi, err = number(b, r.min, r.max); err != nil {
				return 0, false, err
			}
			if hi < lo {
				return 0, false, fmt.Errorf("range %q runs backwards", body)
			}
		default:
			if lo, err = number(body, r.min, r.max); err != nil {
				return 0, false, err
			}
			hi = lo
			if stepped {
				hi = r.max // "5/15" is 5, 20, 35, 50, as in Vixie cron
			}
		}
		set |= span(lo, hi, step)
	}
	return set, false, nil
}

func number(s string, lo, hi int) (int, error) {
	if s == "" || len(s) > 2 || strings.Trim(s, "0123456789") != "" {
		return 0, errItem
	}
	n, _ := strconv.Atoi(s)
	if n < lo || n > hi {
		return 0, fmt.Errorf("%d is outside %d to %d", n, lo, hi)
	}
	return n, nil
}

func span(lo, hi, step int) uint64 {
	var s uint64
	for v := lo; v <= hi; v += step {
		s |= 1 << v
	}
	return s
}

func (c *cron) has(field, v int) bool { return c.sets[field]&(1<<v) != 0 }

// dayMatches is the day rule: with both day fields restricted, either
// may match; otherwise both must (one of them being "*").
func (c *cron) dayMatches(t time.Time) bool {
	dom, dow := c.has(2, t.Day()), c.has(4, int(t.Weekday()))
	if !c.star[2] && !c.star[4] {
		return dom || dow
	}
	return dom && dow
}

// possible says some date matches: with day of week "*", some listed
// day of month must exist in some listed month (29 February counts).
func (c *cron) possible() bool {
	if !c.star[4] {
		return true // a restricted weekday occurs in every month
	}
	days := [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}
	for m := 1; m <= 12; m++ {
		if c.has(3, m) && c.sets[2]&span(1, days[m], 1) != 0 {
			return true
		}
	}
	return false
}

// next finds the first matching minute after t: day by day (at most
// eight years, which holds every 29 February), then the first hour and
// minute of that day after t.
func (c *cron) next(t time.Time) (time.Time, bool) {
	t = t.Truncate(time.Minute).Add(time.Minute)
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	for range 8*366 + 1 {
		if c.has(3, int(day.Month())) && c.dayMatches(day) {
			from := 0
			if day.Equal(time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)) {
				from = t.Hour()*60 + t.Minute()
			}
			for m := from; m < 24*60; m++ {
				if c.has(1, m/60) && c.has(0, m%60) {
					return day.Add(time.Duration(m) * time.Minute), true
				}
				if !c.has(1, m/60) {
					m += 59 - m%60 // skip the rest of an hour that never matches
				}
			}
		}
		day = day.AddDate(0, 0, 1)
	}
	return time.Time{}, false
}
