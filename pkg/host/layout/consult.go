package layout

// ConsultLog is brokerd's outbound consult log (package consultlog):
// every payload sent to a remote model, in full, and each answer,
// hash-chained. It is in a file of its own beside the audit log, not in
// it, because it holds what the audit log deliberately never does (the
// payload's content); each request names its audit decision by hash. Its
// head record is beside it, broker/consult.head, in broker/ (which brokerd
// writes), as the audit log's is.
var ConsultLog = Entry{Path: "broker/consult", Kind: Dir, Mode: 0o700, Writer: "brokerd", Up: true, Owner: Brokerd, Files: 0o600,
	Doc: "the outbound consult log, consult.jsonl: every consult payload in full and its answer, hash-chained (bxctl consult log); its head record beside it, broker/consult.head", Rests: "0700 brokerd's, inside broker/"}
