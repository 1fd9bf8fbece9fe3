package fakes

import (
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	llama "wntrmute.dev/boxmaker/checks/fake/llama"
	mm "wntrmute.dev/boxmaker/checks/fake/mattermost"
)

func TestServe(t *testing.T) {
	dir := os.Getenv("BOXMAKER_VM_FAKES")
	if dir == "" {
		t.Skip("runs only inside the VM test host's guest (BOXMAKER_VM_FAKES)")
	}
	// Pings every 5 s, well inside loopd's 30 s idle limit, so a reply
	// the mid-turn check holds keeps its stream alive (the server's
	// default sse_ping_interval of 30 s is that limit itself).
	srv := llama.New(t, llama.Options{Slots: 2, NCtx: 65536, PingInterval: 5 * time.Second})
	// loopd's startup self-test (a tool call, then two plain turns), then
	// the owner's message. Every later start of loopd (the kill test)
	// runs the self-test again, so the script repeats.
	var replies []llama.Reply
	for range 8 {
		replies = append(replies,
			llama.Reply{Reasoning: "The time.", ToolCalls: []llama.ToolCall{{Name: "clock", Arguments: `{}`}}},
			llama.Reply{Reasoning: "Greet.", Content: "Hello."},
			llama.Reply{Reasoning: "Again.", Content: "Hello again."},
		)
		if len(replies) == 3 {
			replies = append(replies, llama.Reply{Reasoning: "Greet the owner.", Content: Answer})
		}
	}
	srv.Script(replies...)
	fmm := mm.New(t)
	bot := fmm.AddUser("boxmaker", true)
	owner := fmm.AddUser("owner", false)
	dm := fmm.Direct(bot.ID, owner.ID)
	u, _ := url.Parse(srv.URL())
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name+".tmp"), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, name+".tmp"), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	write("mm.url", fmm.URL())
	write("bot.token", bot.Token)
	write("owner.id", owner.ID)
	midTurn(t, dir, srv, fmm, bot.ID, owner.ID, dm)
	write("llama.addr", u.Host) // last: the test waits for it
	go func() {
		for fmm.Connections() == 0 {
			time.Sleep(100 * time.Millisecond)
		}
		p, err := fmm.PostAs(owner.ID, mm.Post{ChannelID: dm, Message: Message})
		if err != nil {
			write("reply.txt", "post: "+err.Error())
			return
		}
		for {
			for _, r := range fmm.Thread(p.ID) {
				if r.UserID == bot.ID {
					write("reply.txt", r.Message)
					return
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
}
