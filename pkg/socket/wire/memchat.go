package wire

// # memchat.sock
//
// memoryd listens on memchat.sock for gatewayd alone: the owner's `!why
// ID` and `!forget ID` in the chat, and nothing else of memadmin.sock's
// (no undo, reindex, review or fleet resync: a compromised gatewayd must
// not be able to promote or rewrite memory). gatewayd sends a request
// only for a post from one of its approvers (`[approvals] users`), the
// way it hands brokerd an approval answer; memoryd makes the forget's
// one-time code itself and completes a forget only when the same id comes
// back with that code from the same thread:
//
//   - [ChatWhy] is answered with a [WhyChain] (memoryd's links only: the
//     audit log's are `bxctl memory why`'s);
//   - [ChatForget] without a code is answered with a [ForgetCode] (what
//     would be forgotten, and the code the owner must repeat); with the
//     code, by a [MemoryDone] receipt.
//
// Either may be answered [*Error]. An entry the thread's project cannot
// recall (another project's) is refused like an unknown one, and a
// forget that Honcho could not take back (fleet memory) is refused in the
// chat and left to bxctl on the host.

// ChatWhy is the owner's `!why ID`, gatewayd to memoryd. Thread (the
// root post id) and Channel place the thread in memoryd's projects;
// User is the approver's Mattermost id, for memoryd's log.
type ChatWhy struct {
	ID      string `json:"id"`
	Thread  string `json:"thread"`
	Channel string `json:"channel"`
	User    string `json:"user"`
}

// ChatForget is the owner's `!forget ID` (Code "": ask for a code) or
// `!forget ID CODE` (forget), gatewayd to memoryd. Thread is the thread's
// root post id: a code is good only in the thread it was given in, once,
// for a few minutes.
type ChatForget struct {
	ID      string `json:"id"`
	Thread  string `json:"thread"`
	Channel string `json:"channel"`
	User    string `json:"user"`
	Code    string `json:"code"`
}

// ForgetCode answers a [ChatForget] without a code: What is the entry as
// recall shows it (one escaped line) and Code the one-time code, in
// [ParseApprovalCode]'s spelling, that `!forget ID CODE` must repeat
// within Minutes.
type ForgetCode struct {
	ID      string `json:"id"`
	What    string `json:"what"`
	Code    string `json:"code"`
	Minutes int    `json:"minutes"`
}

// Tags.
func (*ChatWhy) Tag() string    { return "chat_why" }
func (*ChatForget) Tag() string { return "chat_forget" }
func (*ForgetCode) Tag() string { return "forget_code" }
