package runner

import (
	"time"

	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// Config is brokerd.toml's [runner] table (package roleconf/brokerd's
// type and checks, which `bxctl doctor` runs too) with what only this
// package's tests can set.
type Config struct {
	brokerd.Runner

	// extraHosts are /etc/hosts lines ("name:address") for the egress
	// proxy's container. Only this package's tests set it, to give a
	// test name a private address without a DNS server; no config can.
	extraHosts []string
	// rootless is what the startup check found: a rootless service maps
	// the container's 65534 to brokerd's own user (keep-id), so a tool
	// reads and writes granted paths as that user, not as a subordinate
	// id that owns nothing; a rootful one gives each container a user
	// namespace of its own (userNS).
	rootless bool
	// seccompProfile is the path of the runner's seccomp profile
	// (toolProfile), which [New] writes; a spec without it is never
	// created.
	seccompProfile string
	// allowTestnetImage lets the startup check accept a tool image built
	// with the test-only boxmaker_testnet tag. Only this package's tests
	// set it; no config can.
	allowTestnetImage bool
}

// The time budget of one call: the tool's limit, then callMargin (the
// mount lock, connecting, the egress proxy, creating and verifying), then
// drainWait for the output after the tool exited, then the removal of
// the tool container and of the egress container, each bounded by
// removeWait, and egressDrain for the proxy's stream. With the largest
// limit it must fit callBudget: loopd stops waiting for brokerd after
// 120 s, and brokerd needs a few seconds to record and answer.
const (
	callBudget  = 115 * time.Second
	callMargin  = 10 * time.Second
	drainWait   = 5 * time.Second
	removeWait  = 10 * time.Second
	egressDrain = 2 * time.Second
)

// worstCase is how long a call with the time limit limit can take.
func worstCase(limit time.Duration) time.Duration {
	return limit + callMargin + drainWait + 2*removeWait + egressDrain
}

// Check validates the table and fills in the defaults
// ([brokerd.Runner.Check]), keeping this package's own settings.
func (c Config) Check() (Config, error) {
	r, err := c.Runner.Check()
	if err != nil {
		return Config{}, err
	}
	c.Runner = r
	return c, nil
}

// timeout is the time limit of one call to tool.
func (c Config) timeout(tool string) time.Duration {
	if tool == toolset.Shell {
		return time.Duration(c.ShellTimeoutS) * time.Second
	}
	return time.Duration(c.TimeoutS) * time.Second
}
