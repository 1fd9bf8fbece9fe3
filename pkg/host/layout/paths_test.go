package layout

import "testing"

// TestPaths: each file the table's directories hold sits in its entry.
func TestPaths(t *testing.T) {
	for got, want := range map[string]string{
		SessionDir("/s", "chat-1"):                   "/s/sessions/chat-1",
		EpochLog(SessionDir("/s", "chat-1"), 3):      "/s/sessions/chat-1/3.jsonl",
		EpochBaseline(SessionDir("/s", "chat-1"), 0): "/s/sessions/chat-1/0.baseline.json",
		EpochRel("chat-1", 12):                       "sessions/chat-1/12.jsonl",
		BrokerSessions("/s"):                         "/s/broker/sessions",
		BrokerScratch("/s"):                          "/s/broker/run",
		RecallIndex("/s"):                            "/s/index/recall.db",
		FleetOutbox("/s"):                            "/s/index/fleet.db",
		LoopJobs("/s"):                               "/s/loop/jobs.json",
		ConfigGlob("/s"):                             "/s/config/*.toml",
		GatewayJobs("/s"):                            "/s/gateway/jobs.json",
	} {
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
}
