package vm

import (
	"fmt"
	"regexp"
	"strconv"
)

// exposureRE matches systemd-analyze security's summary line for one
// unit, "→ Overall exposure level for NAME: 9.6 UNSAFE 😨" (systemd 252,
// src/analyze/analyze-security.c): one decimal place, 0.0 to 10.0.
var exposureRE = regexp.MustCompile(`(?m)^\S* ?Overall exposure level for (\S+): (\d{1,2})\.(\d) ([A-Z]+)`)

// Exposure is one unit's overall exposure level from `systemd-analyze
// security UNIT`, in tenths (9.6 is 96), so it compares exactly against a
// recorded bound.
type Exposure struct {
	Unit   string
	Tenths int
	Rating string // SAFE, OK, MEDIUM, EXPOSED or UNSAFE
}

func (e Exposure) String() string {
	return fmt.Sprintf("%s: %d.%d %s", e.Unit, e.Tenths/10, e.Tenths%10, e.Rating)
}

// ParseExposure finds unit's summary line in systemd-analyze security's
// output. The output comes from the guest, which the test examines, so
// anything but exactly one well-formed line for unit, between 0.0 and
// 10.0, is an error.
func ParseExposure(out, unit string) (Exposure, error) {
	var found []Exposure
	for _, m := range exposureRE.FindAllStringSubmatch(out, -1) {
		if m[1] != unit {
			continue
		}
		whole, _ := strconv.Atoi(m[2])
		frac, _ := strconv.Atoi(m[3])
		e := Exposure{Unit: unit, Tenths: whole*10 + frac, Rating: m[4]}
		if e.Tenths > 100 {
			return Exposure{}, fmt.Errorf("parse exposure of %s: %s is over 10.0", unit, e)
		}
		found = append(found, e)
	}
	if len(found) != 1 {
		return Exposure{}, fmt.Errorf("parse exposure of %s: want one \"Overall exposure level\" line for it, found %d", unit, len(found))
	}
	return found[0], nil
}
