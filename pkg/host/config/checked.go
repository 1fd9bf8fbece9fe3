package config

// Checked is a role's config loader: keys the role no longer reads
// refused by name, a strict [Decode] into T, then the role's check,
// which names the file in its errors and returns the config with its
// defaults filled. Each role's package (roleconf/<role>) has one, so
// the daemon ([Checked.Load]) and `bxctl doctor` ([Checked.Parse]) run
// the same checks on the same type.
type Checked[T any] struct {
	Check func(c T, name string) (T, error)
	// Retired are the top-level keys an older config may hold that the
	// role no longer reads, each with why and what to do (its runbook
	// pointer included): such a config is refused with one line naming
	// the key to delete, not as an unknown key.
	Retired map[string]string
}

// Load reads path as [Load] does (its ownership rule included) and
// checks it.
func (l Checked[T]) Load(path string) (T, error) {
	data, err := read(path)
	if err != nil {
		var zero T
		return zero, err
	}
	return l.Parse(data, path)
}

// Parse checks text already read, named name in errors, as
// [Checked.Load] does once the file is read.
func (l Checked[T]) Parse(data []byte, name string) (T, error) {
	var c T
	if err := retired(data, name, l.Retired); err != nil {
		return c, err
	}
	if err := Decode(data, name, &c); err != nil {
		return c, err
	}
	return l.Check(c, name)
}

// RetiredPeers is why a config's list of socket's peer uids is no longer
// read: the layout table decides them.
func RetiredPeers(socket string) string {
	return "which users " + socket + " takes is the layout table's (config/users.toml with a user per role, else this daemon's own user); see docs/runbook.md#layout-accept"
}
