package runner

import (
	"flag"
	"fmt"
)

// TestOnlyNetwork lets a test outside this package (brokerd's consult
// tests) reach a listener it controls: hosts become /etc/hosts lines of
// the egress container ("name:address"), and the startup check accepts
// a tool image built with boxmaker_testnet (whose proxy admits private
// addresses). It panics outside a test binary, and checks/arch's TestOnly
// rule refuses a use of it from any file that is not a test; a release
// image's proxy would refuse the private address anyway (pkg/tool/netpolicy).
func TestOnlyNetwork(c *Config, hosts []string) {
	if flag.Lookup("test.v") == nil {
		panic(fmt.Sprintf("runner.TestOnlyNetwork called outside a test binary (hosts %q)", hosts))
	}
	c.extraHosts = hosts
	c.allowTestnetImage = true
}
