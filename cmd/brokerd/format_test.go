package main

import (
	"testing"

	"wntrmute.dev/boxmaker/checks/formattest"
)

// TestRefusesNewerFormat: brokerd refuses a state directory of a newer
// format than it knows (and a garbled format file) before it reads
// anything else, and takes format 0 and its own past that check.
func TestRefusesNewerFormat(t *testing.T) { formattest.Refuses(t, "brokerd") }
