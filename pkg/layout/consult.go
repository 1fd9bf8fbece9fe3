package layout

// ConsultLog is brokerd's outbound consult log (package consultlog):
// every payload sent to a remote model, in full, and each answer,
// hash-chained. It is in a file of its own beside the audit log, not in
// it, because it holds what the audit log deliberately never does (the
// payload's content); each request names its audit decision by hash.
// brokerd makes it at its first start (Up false), so a state directory
// made before it existed still passes brokerd's start-up check.
var ConsultLog = Entry{Path: "broker/consult", Kind: Dir, Mode: 0o700, Writer: "brokerd", Up: false, Owner: Brokerd, Files: 0o600,
	Doc: "the outbound consult log, consult.jsonl: every consult payload in full and its answer, hash-chained (bxctl consult log)", Rests: "0700 brokerd's, inside broker/"}
