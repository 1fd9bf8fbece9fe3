package runner

import (
	"context"
	"errors"
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
func (p *Podman) Check(ctx context.Context) (err error) {
	ctx, cancel := context.WithTimeout(ctx, StartupTimeout)
	defer cancel()
	defer func() { err = slowIf(ctx, err) }()
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

// StartupTimeout bounds each of brokerd's startup steps with Podman
// (the sweep, then the check); tests shorten it.
var StartupTimeout = 60 * time.Second

// ErrPodmanSlow marks a startup step that failed because Podman did not
// answer within [StartupTimeout]: a busy or still-starting service (at
// boot, under load), not a setting the owner must change. brokerd then
// exits as failed (1), which systemd retries, rather than as refused
// (2), which it does not (RestartPreventExitStatus=2).
var ErrPodmanSlow = errors.New("Podman did not answer brokerd's startup check in time; brokerd exits so that systemd starts it again; see docs/runbook.md#podman-unavailable")

// slowIf marks err as [ErrPodmanSlow] when ctx's own deadline has passed.
func slowIf(ctx context.Context, err error) error {
	if err == nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	return &slow{err}
}

// slow is a startup error that is ErrPodmanSlow as well as its cause.
type slow struct{ cause error }

func (e *slow) Error() string {
	cause := e.cause.Error()
	if i := strings.LastIndex(cause, "; see docs/runbook.md#"); i >= 0 {
		cause = cause[:i]
	}
	return "Podman did not answer within " + StartupTimeout.String() + ", so brokerd exits for systemd to start it again (" + cause + "); see docs/runbook.md#podman-unavailable"
}

func (e *slow) Is(target error) bool { return target == ErrPodmanSlow }

func (e *slow) Unwrap() error { return e.cause }

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
func (p *Podman) Sweep(ctx context.Context) (n int, err error) {
	ctx, cancel := context.WithTimeout(ctx, StartupTimeout)
	defer cancel()
	defer func() { err = slowIf(ctx, err) }()
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
