package audit

// Records reads the log in dir in order, read-only, and calls fn with
// each record that parses and its line's hash (the hash the next line's
// prev names). A line that does not parse (damage a recovery describes,
// or a break) is passed over: Records is for finding records, such as
// `bxctl memory why` looking up a session's calls; [Verify] is what says
// whether the log can be trusted.
func Records(dir string, fn func(r Record, hash string) error) error {
	files, err := listLogs(dir)
	if err != nil {
		return err
	}
	src := &source{dir: dir, files: files}
	defer src.close()
	for {
		l, err := src.read()
		if err != nil || l == nil {
			return err
		}
		if l.long || l.torn {
			continue
		}
		r, err := l.parse()
		if err != nil {
			continue
		}
		if err := fn(r, hashHex(l.sum)); err != nil {
			return err
		}
	}
}
