package config

// Checked is a role's config loader: a strict [Decode] into T, then the
// role's check, which names the file in its errors and returns the
// config with its defaults filled. Each role's package (roleconf/<role>)
// has one, so the daemon ([Checked.Load]) and `bxctl doctor`
// ([Checked.Parse]) run the same checks on the same type.
type Checked[T any] func(c T, name string) (T, error)

// Load reads path as [Load] does (its ownership rule included) and
// checks it.
func (check Checked[T]) Load(path string) (T, error) {
	var c T
	if err := Load(path, &c); err != nil {
		return c, err
	}
	return check(c, path)
}

// Parse checks text already read, named name in errors, as
// [Checked.Load] does once the file is read.
func (check Checked[T]) Parse(data []byte, name string) (T, error) {
	var c T
	if err := Decode(data, name, &c); err != nil {
		return c, err
	}
	return check(c, name)
}
