package config

import (
	"fmt"
	"path/filepath"
	"slices"
)

// Checked is a role's config loader: keys the role no longer reads
// refused by name, keys the layout table now decides ([Placed]) judged
// against the table, a strict [Decode] into T, the fields of [Placed]
// filled from the state directory, then the role's check, which names
// the file in its errors and returns the config with its defaults
// filled. Each role's package (roleconf/<role>) has one, so the daemon
// ([Checked.Load]) and `bxctl doctor` ([Checked.Parse]) run the same
// checks on the same type.
type Checked[T any] struct {
	Check func(c T, name string) (T, error)
	// Retired are the top-level keys an older config may hold that the
	// role no longer reads, each with why and what to do (its runbook
	// pointer included): such a config is refused with one line naming
	// the key to delete, not as an unknown key.
	Retired map[string]string
	// Placed are the paths the role takes from its state directory and
	// the layout table, each under the key an older config named it by.
	Placed Placed[T]
}

// Placed maps each top-level key an older config held for a path the
// layout table now decides to where that path goes in T and what the
// table gives for it.
type Placed[T any] map[string]Place[T]

// Place is one path of [Placed]: Field is where it goes in the config,
// In its value in state directory state (package layout).
type Place[T any] struct {
	Field func(*T) *string
	In    func(state string) string
}

// Load reads path as [Load] does (its ownership rule included) and
// checks it; its paths are state's. The strings returned are the keys
// the file still holds that the table decides, each with the same value
// as the table's: accepted, but to be deleted (a daemon logs each as a
// warning, doctor reports it).
func (l Checked[T]) Load(path, state string) (T, []string, error) {
	data, err := read(path)
	if err != nil {
		var zero T
		return zero, nil, err
	}
	return l.Parse(data, path, state)
}

// Parse checks text already read, named name in errors, as
// [Checked.Load] does once the file is read.
func (l Checked[T]) Parse(data []byte, name, state string) (T, []string, error) {
	var c T
	if err := retired(data, name, l.Retired); err != nil {
		return c, nil, err
	}
	if state == "" && len(l.Placed) > 0 {
		return c, nil, fmt.Errorf("config %s: no state directory to take its sockets and state paths from (the layout table's, under it); give the role -state DIR or keep its config at DIR/config/<role>.toml; see docs/runbook.md#state-dir-missing", name)
	}
	if len(l.Placed) > 0 && !filepath.IsAbs(state) {
		abs, err := filepath.Abs(state)
		if err != nil {
			return c, nil, fmt.Errorf("config %s: state directory %s: %v; see docs/runbook.md#state-dir-missing", name, state, err)
		}
		state = abs
	}
	leftover, rest, err := placedKeys(data, name, state, l.Placed)
	if err != nil {
		return c, nil, err
	}
	if err := decode(data, name, &c, rest); err != nil {
		return c, nil, err
	}
	for _, p := range l.Placed {
		*p.Field(&c) = p.In(state)
	}
	c, err = l.Check(c, name)
	if err != nil {
		return c, nil, err
	}
	return c, leftover, nil
}

// placedKeys judges each key of placed that the text sets (top-level):
// a value other than the table's is refused with one line naming the
// key and the table's value; the table's own value is accepted with a
// line saying to delete the key. rest is what [Decode] may then ignore.
func placedKeys[T any](data []byte, name, state string, placed Placed[T]) (leftover []string, rest map[string]bool, err error) {
	if len(placed) == 0 {
		return nil, nil, nil
	}
	top, ok := topLevel(data)
	if !ok {
		return nil, nil, nil // Decode names the line
	}
	keys := make([]string, 0, len(placed))
	for k := range placed {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	rest = map[string]bool{}
	for _, k := range keys {
		v, ok := top[k]
		if !ok {
			continue
		}
		want := placed[k].In(state)
		if s, isText := v.(string); !isText || s == "" || filepath.Clean(s) != want {
			return nil, nil, fmt.Errorf("config %s: key %s is no longer read: the layout table gives %q (from the state directory %s); delete its line; see docs/runbook.md#layout-key-moved", name, k, want, state)
		}
		leftover = append(leftover, fmt.Sprintf("config %s: key %s is no longer read (its value is the layout table's, %q); delete its line; see docs/runbook.md#layout-key-moved", name, k, want))
		rest[k] = true
	}
	return leftover, rest, nil
}

// RetiredPeers is why a config's list of socket's peer uids is no longer
// read: the layout table decides them.
func RetiredPeers(socket string) string {
	return "which users " + socket + " takes is the layout table's (config/users.toml with a user per role, else this daemon's own user); see docs/runbook.md#layout-accept"
}
