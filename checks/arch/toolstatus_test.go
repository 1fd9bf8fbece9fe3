package arch

import (
	"strings"
	"testing"
)

func TestRepoOneToolStatus(t *testing.T) { report(t, ToolStatuses(root)) }

// TestPlantedToolStatusTwin plants each twin the issue removed (loopd's
// int enum, the session log's string enum, the switches between them, a
// status-to-status map) beside the one status, and a tree that only
// reads the one status, which must pass.
func TestPlantedToolStatusTwin(t *testing.T) {
	const home = "package wire\n\ntype ToolStatus string\n\nconst (\n\tStatusRan ToolStatus = \"ran\"\n\tStatusFailed ToolStatus = \"failed\"\n\tStatusDenied ToolStatus = \"denied\"\n)\n"
	dir := plant(t, map[string]string{
		"pkg/socket/wire/broker.go": home,
		"cmd/loopd/internal/broker/broker.go": "package broker\n\ntype Status int\n\nconst (\n\tRan Status = iota + 1\n\tFailed\n\tDenied\n)\n" +
			"func outcome(s wire.ToolStatus) Status {\n\tswitch s {\n\tcase wire.StatusRan:\n\t\treturn Ran\n\t}\n\treturn Denied\n}\n",
		"pkg/logs/sessionlog/sessionlog.go": "package sessionlog\n\ntype ResultStatus string\n\nconst (\n\tStatusOK ResultStatus = \"ok\"\n\tStatusError ResultStatus = \"error\"\n)\n",
		"pkg/logs/other/words.go":           "package other\n\ntype Word string\n\nconst (\n\tA Word = \"ran\"\n\tB Word = \"denied\"\n)\n",
		"cmd/loopd/internal/turn/turn.go": "package turn\n\nfunc f(out, r *x) {\n\tswitch out.Status {\n\tcase broker.Ran:\n\t\tr.Status = session.StatusOK\n\t}\n}\n" +
			"var m = map[wire.ToolStatus]sessionlog.ResultStatus{}\n",
	})
	got := strings.Join(ToolStatuses(dir), "\n")
	for _, want := range []string{
		"cmd/loopd/internal/broker/broker.go: type Status is a second tool status (its constants mean ran, failed, denied)",
		"cmd/loopd/internal/broker/broker.go:12: a case that turns one tool status into another",
		"pkg/logs/sessionlog/sessionlog.go: type ResultStatus is a second tool status (its constants mean ran, failed)",
		"pkg/logs/other/words.go: type Word is a second tool status (its constants mean ran, denied)",
		"cmd/loopd/internal/turn/turn.go:5: a case that turns one tool status into another",
		"cmd/loopd/internal/turn/turn.go:9: a map from tool status to tool status",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("ToolStatuses missed %q; got:\n%s", want, got)
		}
	}
	if strings.Contains(got, "pkg/socket/wire/broker.go") {
		t.Errorf("ToolStatuses refused the one status:\n%s", got)
	}

	clean := plant(t, map[string]string{
		"pkg/socket/wire/broker.go": home,
		"pkg/logs/sessionlog/words.go": "package sessionlog\n\nvar words = []struct{ s wire.ToolStatus; w string }{{wire.StatusRan, \"ok\"}}\n" +
			"func msg(r *ToolResult) string {\n\tswitch r.Status {\n\tcase wire.StatusRan:\n\t\treturn r.Content\n\t}\n\treturn \"denied: \" + r.Content\n}\n",
		"pkg/logs/audit/record.go":        "package audit\n\ntype Outcome string\n\nconst (\n\tAllowed Outcome = \"allowed\"\n\tDenied Outcome = \"denied\"\n)\n",
		"cmd/loopd/internal/turn/turn.go": "package turn\n\nfunc f(out, r *x) {\n\tr.Status = out.Status\n\tif out.Status == wire.StatusDenied {\n\t\temit()\n\t}\n}\n",
	})
	if got := ToolStatuses(clean); len(got) != 0 {
		t.Errorf("ToolStatuses on a tree with one status = %q, want nothing", got)
	}
}
