package loopd

import (
	"strings"
	"testing"
)

func TestJobsRefusals(t *testing.T) {
	if err := (Jobs{}).check(); err != nil {
		t.Errorf("the zero [jobs] = %v", err)
	}
	if err := (Jobs{Tiering: "off", PollMS: 20, ClockFile: "/tmp/clock"}).check(); err != nil {
		t.Errorf("a valid [jobs] = %v", err)
	}
	for _, tc := range []struct {
		c    Jobs
		want string
	}{
		{Jobs{Tiering: "weekly"}, "jobs.tiering"},
		{Jobs{Tiering: "0 4 * * 8"}, "jobs.tiering"},
		{Jobs{PollMS: 5}, "poll_ms"},
		{Jobs{PollMS: -1}, "poll_ms"},
		{Jobs{ClockFile: "clock"}, "clock_file"},
	} {
		if err := tc.c.check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("check(%+v) = %v, want an error naming %s", tc.c, err, tc.want)
		}
	}
}
