package session

// TestOnlyStep, if set, is called at each step of a change; an error
// ends the change there, as a crash would. Only tests and loopd's
// debug knob set it.
var TestOnlyStep func(Step) error

func step(st Step) error {
	if TestOnlyStep != nil {
		return TestOnlyStep(st)
	}
	return nil
}
