package store

// Tiered are the identity files the tiering job may reorganise: the
// agent-written ones (soul.md is the owner's).
var Tiered = []string{Memory, User}

// IdentityEntries returns the entries of each file in [Tiered], in file
// order, as consolidate numbers them.
func (s *Store) IdentityEntries() (map[string][]string, error) {
	out := map[string][]string{}
	for _, f := range Tiered {
		text, err := s.read(f)
		if err != nil {
			return nil, err
		}
		out[f] = Entries(text)
	}
	return out, nil
}
