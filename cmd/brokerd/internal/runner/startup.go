package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containers/podman/v5/pkg/bindings/containers"
	"github.com/containers/podman/v5/pkg/bindings/system"
)

// Check is brokerd's startup check: Podman 5 answers, with seccomp
// support (and whether it is rootless, which decides the containers'
// user namespace), the tool image is present, and a probe container
// created with the tool containers' settings gets every limit asked for
// and, run, reports from inside the isolation they ask for (see probe).
// brokerd refuses to start otherwise, each failure with its runbook
// entry.
func (p *Podman) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	conn, err := p.connect(ctx)
	if err != nil {
		return err
	}
	info, err := system.Info(conn, nil)
	if err != nil {
		return fail(ErrPodman, fmt.Sprintf("info: %v", err))
	}
	if !supportedVersion(info.Version.Version) {
		return fail(ErrPodman, fmt.Sprintf("the service is Podman %q; brokerd needs Podman 5, whose create API its settings are written for", info.Version.Version))
	}
	if info.Host == nil || !info.Host.Security.SECCOMPEnabled {
		return ErrNoSeccomp
	}
	p.cfg.rootless = info.Host.Security.Rootless
	if err := p.imagePresent(conn); err != nil {
		return err
	}
	return p.probe(conn)
}

// supportedVersion is whether a Podman version is 5.x: the bindings and
// the settings brokerd asks for are written for its create API, and a
// later major version may read them differently.
func supportedVersion(v string) bool {
	major, _, _ := strings.Cut(v, ".")
	return major == "5"
}

// Sweep removes every container this brokerd labelled (it tracks none
// at startup, so all of them are leftovers of a crash) and every egress
// directory left in its work directory. It returns how many containers
// it removed.
func (p *Podman) Sweep(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	conn, err := p.connect(ctx)
	if err != nil {
		return 0, err
	}
	list, err := containers.List(conn, new(containers.ListOptions).WithAll(true).
		WithFilters(map[string][]string{"label": {LabelInstance + "=" + p.instance}}))
	if err != nil {
		return 0, fail(ErrPodman, fmt.Sprintf("list: %v", err))
	}
	for _, c := range list {
		p.remove(conn, c.ID)
	}
	entries, err := os.ReadDir(p.work)
	if err != nil {
		return len(list), err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "egress-") {
			os.RemoveAll(filepath.Join(p.work, e.Name()))
		}
	}
	return len(list), nil
}
