package layout

// TestOnlyMakeStep, if set, is called by [Make] at each point where a
// role racing it could act: "listed" after a directory's names are read
// (path is the directory), "checked" after an entry's owner, kind and
// links were judged and before it is changed (path is the entry). path
// is relative to the state directory, slash-separated. Only tests set
// it (checks/arch's TestOnly rule): it lets a test swap what Make is
// about to touch at exactly that moment.
var TestOnlyMakeStep func(step, path string)

func makeStep(step, path string) {
	if TestOnlyMakeStep != nil {
		TestOnlyMakeStep(step, path)
	}
}
