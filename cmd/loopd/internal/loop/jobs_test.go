package loop

import (
	"strings"
	"testing"
)

func TestJobsConfigRefusals(t *testing.T) {
	if err := (JobsConfig{}).check("c"); err != nil {
		t.Errorf("the zero [jobs] = %v", err)
	}
	if err := (JobsConfig{Tiering: "off", PollMS: 20, ClockFile: "/tmp/clock"}).check("c"); err != nil {
		t.Errorf("a valid [jobs] = %v", err)
	}
	for _, tc := range []struct {
		c    JobsConfig
		want string
	}{
		{JobsConfig{Tiering: "weekly"}, "jobs.tiering"},
		{JobsConfig{Tiering: "0 4 * * 8"}, "jobs.tiering"},
		{JobsConfig{PollMS: 5}, "poll_ms"},
		{JobsConfig{PollMS: -1}, "poll_ms"},
		{JobsConfig{ClockFile: "clock"}, "clock_file"},
	} {
		if err := tc.c.check("c"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("check(%+v) = %v, want an error naming %s", tc.c, err, tc.want)
		}
	}
}
