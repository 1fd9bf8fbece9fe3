package runner

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/containers/podman/v5/pkg/bindings"
	"github.com/containers/podman/v5/pkg/bindings/containers"
	"github.com/containers/podman/v5/pkg/bindings/images"
	"github.com/containers/podman/v5/pkg/specgen"

	"wntrmute.dev/boxmaker/cmd/brokerd/internal/policy"
	"wntrmute.dev/boxmaker/pkg/host/secret"
	"wntrmute.dev/boxmaker/pkg/tool/toolinput"
	"wntrmute.dev/boxmaker/pkg/tool/toolset"
)

// Podman runs each call in a fresh container through Podman's API. Make
// it with [New].
type Podman struct {
	cfg      Config
	url      string
	instance string
	work     string // parent of the per-call egress directories
	secrets  func(name string) (secret.Value, error)
	log      *slog.Logger
	// protected are the real paths no mount may hold or lie inside.
	protected []string
	lock      *mountLock
	toolkit   toolkitCopy // toolkit.go: the tool image's toolkit, for MCP containers
	// phase, if set (only by this package's benchmark), is told how long
	// each step of a call took.
	phase func(step string, d time.Duration)
	// conn is the runner's one connection to Podman (connect).
	connMu sync.Mutex
	conn   context.Context
	// afterPin, if set (only by this package's tests), runs between the
	// mount check and the container's creation: a swap made there is
	// what the post-start check must catch.
	afterPin func()
	// removing counts the removals left running after an answer
	// (removal.go); beforeRemove, if set (only by this package's tests),
	// runs in each of them before the container is removed.
	removing     removals
	beforeRemove func(id string)
}

// mark reports the step that ended now and starts the next.
func (p *Podman) mark(step string, since *time.Time) {
	if p.phase != nil {
		now := time.Now()
		p.phase(step, now.Sub(*since))
		*since = now
	}
}

// The runner's errors: fixed text, each with its runbook entry.
var (
	ErrPodman        = errors.New("the Podman API service did not answer or failed the call; see docs/runbook.md#podman-unavailable")
	ErrImage         = errors.New("the tool image named in brokerd.toml is not in Podman's storage, and it is never pulled; see docs/runbook.md#tool-image-missing")
	ErrIsolation     = errors.New("the container could not get all the isolation asked for from Podman, so it did not run; see docs/runbook.md#runner-isolation-lost")
	ErrSecret        = errors.New("the secret this call's grant names could not be loaded; see docs/runbook.md#tool-secret-missing")
	ErrSecretInvalid = errors.New("the secret this call's grant names is not valid UTF-8 (or not a valid tool secret), so the tool's JSON input cannot carry it unchanged; see docs/runbook.md#tool-secret-invalid")
	ErrEgress        = errors.New("the egress proxy for this call's hosts did not start; see docs/runbook.md#egress-unavailable")
	ErrBusy          = errors.New("calls with a writable mount held the runner until this call's time ran out; see docs/runbook.md#runner-busy")
	ErrNotATool      = errors.New("this tool does not run in a tool container; see docs/runbook.md#runner-unavailable")
	errNoInstance    = errors.New("runner: an instance name is required")
)

// New makes a runner. instance names this brokerd in its containers'
// labels (so [Podman.Sweep] removes only its own); work is a directory
// only brokerd's user can enter, for the egress proxies' sockets;
// protected lists brokerd's own files and directories (state, grants,
// config, socket directories, secret files) that no mount may hold or lie
// inside; the runner adds its own (see protectedPaths). secrets loads a
// secret's value by the name a grant gives.
func New(cfg Config, instance, work string, protected []string, secrets func(string) (secret.Value, error), log *slog.Logger) (*Podman, error) {
	cfg, err := cfg.Check()
	if err != nil {
		return nil, err
	}
	if instance == "" {
		return nil, errNoInstance
	}
	url := cfg.PodmanURL()
	if err := os.MkdirAll(work, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(work, 0o700); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	prot, err := protectedPaths(cfg, work, protected)
	if err != nil {
		return nil, err
	}
	if cfg.seccompProfile, err = writeProfile(work); err != nil {
		return nil, err
	}
	return &Podman{cfg: cfg, url: url, instance: instance, work: work, secrets: secrets, log: log, protected: prot, lock: newMountLock()}, nil
}

// Instance derives an instance name from brokerd's state directory.
func Instance(stateDir string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(stateDir)))
	return hex.EncodeToString(sum[:8])
}

// connect gives a call the runner's connection to Podman (the bindings'
// HTTP client, over the service's socket) with ctx's deadline and
// cancellation. The first call makes it and pings the service; later
// calls reuse it and its idle sockets. Nothing may replace its transport,
// as the bindings' containers.Attach does: the runner attaches on a
// socket of its own (stream.go).
func (p *Podman) connect(ctx context.Context) (context.Context, error) {
	p.connMu.Lock()
	defer p.connMu.Unlock()
	if p.conn == nil {
		c, err := bindings.NewConnection(ctx, p.url)
		if err != nil {
			return nil, fail(ErrPodman, err.Error())
		}
		p.conn = context.WithoutCancel(c)
	}
	return withConn{ctx, p.conn}, nil
}

// withConn is a call's context that also carries the runner's
// connection, which the bindings look up among its values.
type withConn struct {
	context.Context
	conn context.Context
}

func (c withConn) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.conn.Value(key)
}

// Run implements Runner.
func (p *Podman) Run(ctx context.Context, d policy.Decision) (Output, error) {
	if !d.Valid() {
		return Output{}, ErrNoDecision
	}
	if _, mcp := d.MCP(); !toolset.IsGranted(d.Tool()) && !mcp {
		return Output{}, ErrNotATool
	}
	timeout := p.cfg.limit(d)
	// The whole call, the wait for the mount lock and containers'
	// creation and removal included, must end before loopd stops waiting.
	ctx, cancel := context.WithTimeout(ctx, timeout+callMargin)
	defer cancel()
	t0 := time.Now()
	// A call with a writable mount holds the lock until its container
	// is removed (deferred first, so released last, or by removeLater);
	// any other call until its container has started (see mountLock).
	exclusive := slices.ContainsFunc(d.Mounts(), func(m policy.Mount) bool { return m.Writable })
	release, err := p.lock.acquire(ctx, exclusive)
	if errors.Is(err, context.Canceled) {
		return Output{}, fail(ErrPodman, "the call was cancelled while it waited for the mount lock")
	} else if err != nil {
		return Output{}, ErrBusy
	}
	later := false // the removal, and so the release, runs after the answer
	defer func() {
		if !later {
			release()
		}
	}()
	// The wait comes out of the tool's own time limit.
	if timeout -= time.Since(t0); timeout < time.Second {
		return Output{}, ErrBusy
	}
	p.mark("mount lock", &t0)
	if problem, err := checkMounts(d, p.protected); err != nil {
		return Output{}, err
	} else if problem != "" {
		return Output{Stderr: problem + "\n", Exit: 1}, nil
	}
	pins, problem := pinMounts(d)
	if problem != "" {
		return Output{Stderr: problem + "\n", Exit: 1}, nil
	}
	defer closePins(pins)
	if p.afterPin != nil {
		p.afterPin()
	}
	stdin, sec, err := p.input(d)
	if err != nil {
		return Output{}, err
	}
	conn, err := p.connect(ctx)
	if err != nil {
		return Output{}, err
	}
	p.mark("connect", &t0)
	// The image is not looked up first: create only looks it up in local
	// storage (the API never pulls), a failed create asks whether it is
	// missing, and verify checks the created container's image ID.
	var egressDir string
	if hosts := d.Hosts(); len(hosts) > 0 {
		names := make([]string, len(hosts))
		for i, h := range hosts {
			names[i] = h.String()
		}
		dir, stop, err := p.startEgress(ctx, names, uint(timeout.Seconds())+backstop+5)
		if err != nil {
			return Output{}, err
		}
		defer stop()
		egressDir = dir
	}
	var toolkit string
	if m, ok := d.MCP(); ok && !m.Server.Remote() {
		if toolkit, err = p.toolkitFile(conn); err != nil {
			return Output{}, err
		}
	}
	id, err := p.create(conn, p.cfg.toolSpec(p.instance, d, egressDir, toolkit))
	if err != nil {
		return Output{}, err
	}
	p.mark("create and verify", &t0)
	var exited bool
	defer func() {
		// A container whose exit was observed runs nothing any more: it
		// is removed after the answer. On every other path (an error, a
		// cancellation, an exit not seen) it is killed and removed
		// before Run returns. So is a call's with hosts: its proxy's
		// stop (deferred above) removes the directory both containers
		// mount, and runs only after this removal.
		if exited && egressDir == "" {
			later = true
			p.removeLater(conn, id, release)
			return
		}
		p.remove(conn, id)
		p.mark("remove", &t0)
	}()
	// Once started, the container's mounts are made: they must be the
	// files the check pinned, and then other calls may go on.
	started := func() error {
		if !exclusive {
			defer release()
		}
		return p.checkPins(conn, id, pins)
	}
	out, err := p.attachRun(conn, id, stdin, timeout, started, &t0)
	// attachRun answers without an error only once it has the exit code.
	exited = err == nil
	return redact(out, sec), err
}

// input is the tool container's stdin: one JSON object holding the
// arguments in their wire form and, if the grant names one, the secret
// (toolinput.Input, which the toolkit decodes).
func (p *Podman) input(d policy.Decision) ([]byte, *toolinput.Secret, error) {
	args, err := callArgs(d)
	if err != nil {
		return nil, nil, fail(ErrNotATool, "its arguments do not marshal: "+err.Error())
	}
	in := toolinput.Input{Args: args}
	if name := d.Secret(); name != "" {
		if p.secrets == nil {
			return nil, nil, ErrSecret
		}
		v, err := p.secrets(name)
		if err != nil || v.IsZero() {
			if p.log != nil {
				p.log.Error("secret for a tool call could not be loaded; see docs/runbook.md#tool-secret-missing", "name", name, "err", errString(err))
			}
			return nil, nil, ErrSecret
		}
		if !utf8.ValidString(v.Reveal()) {
			// JSON would replace the invalid bytes: the tool would get
			// another value than the one stored (review 15).
			return nil, nil, ErrSecretInvalid
		}
		in.Secret = &toolinput.Secret{Name: name, Value: v}
	}
	stdin, err := in.MarshalJSON()
	if err != nil {
		return nil, nil, fail(ErrSecretInvalid, err.Error())
	}
	return stdin, in.Secret, nil
}

func errString(err error) string {
	if err == nil {
		return "empty"
	}
	return err.Error()
}

// imagePresent checks that the image is in local storage; it is never
// pulled.
func (p *Podman) imagePresent(conn context.Context) error {
	ok, err := images.Exists(conn, p.cfg.ToolImage, nil)
	switch {
	case err != nil:
		return fail(ErrPodman, err.Error())
	case !ok:
		return ErrImage
	}
	return nil
}

// LabelCall carries a nonce fresh for each container the runner
// creates, so that a create whose answer was lost (the call cancelled
// while Podman went on creating) can still be found and removed.
const LabelCall = "dev.wntrmute.boxmaker.call"

// create creates a container and checks that Podman gave it everything
// asked for; anything less removes it and fails. A create that fails,
// cancelled or not, removes whatever carries its nonce.
func (p *Podman) create(conn context.Context, s *specgen.SpecGenerator) (string, error) {
	var b [16]byte
	rand.Read(b[:])
	nonce := hex.EncodeToString(b[:])
	s.Labels[LabelCall] = nonce
	if p.cfg.seccompProfile == "" || s.SeccompProfilePath != p.cfg.seccompProfile {
		// An empty path would be containers.conf's profile, which may
		// allow new namespaces or nothing at all.
		return "", fail(ErrIsolation, "the container's spec does not name the runner's seccomp profile")
	}
	resp, err := containers.CreateWithSpec(conn, s, nil)
	if err != nil {
		p.removeByNonce(conn, nonce)
		for _, v := range s.ImageVolumes {
			if ok, ierr := images.Exists(conn, v.Source, nil); ierr == nil && !ok {
				return "", ErrImage
			}
		}
		if ok, ierr := images.Exists(conn, s.Image, nil); ierr == nil && !ok {
			if s.Image != p.cfg.ToolImage {
				return "", ErrMCPImage
			}
			return "", ErrImage
		}
		return "", fail(ErrPodman, fmt.Sprintf("create: %v", err))
	}
	if len(resp.Warnings) > 0 {
		p.remove(conn, resp.ID)
		return "", fail(ErrIsolation, fmt.Sprintf("Podman warned: %s", strings.Join(resp.Warnings, "; ")))
	}
	if err := p.verify(conn, resp.ID, s); err != nil {
		p.remove(conn, resp.ID)
		return "", err
	}
	return resp.ID, nil
}

// verify reads the created container back and compares what isolation
// depends on with what was asked for.
func (p *Podman) verify(conn context.Context, id string, s *specgen.SpecGenerator) error {
	c, err := containers.Inspect(conn, id, nil)
	if err != nil {
		return requestFailed(conn, "inspect", err)
	}
	var bad []string
	check := func(ok bool, what string) {
		if !ok {
			bad = append(bad, what)
		}
	}
	check("sha256:"+c.Image == s.Image, "image")
	if h := c.HostConfig; h == nil {
		bad = append(bad, "host config")
	} else {
		check(h.Memory == *s.ResourceLimits.Memory.Limit, "memory limit")
		check(h.MemorySwap == *s.ResourceLimits.Memory.Swap, "swap limit")
		check(h.PidsLimit == s.ResourceLimits.Pids.Limit, "pids limit")
		check(h.ReadonlyRootfs, "read-only root")
		check(s.NetNS.NSMode != specgen.NoNetwork || h.NetworkMode == "none", "no network")
		check(hasAll(h.SecurityOpt, "no-new-privileges"), "no new privileges")
	}
	if cfg := c.Config; cfg == nil {
		bad = append(bad, "config")
	} else {
		check(cfg.User == containerUser, "user")
	}
	check(len(c.EffectiveCaps) == 0, "capabilities")
	bad = append(bad, isolationDiffers(c, s)...)
	if len(bad) > 0 {
		return fail(ErrIsolation, fmt.Sprintf("the created container differs in: %s", strings.Join(bad, ", ")))
	}
	return nil
}

// requestFailed is a failed request to Podman: the call cancelled
// (brokerd stopping, or loopd gone) if it was, else Podman failing.
func requestFailed(conn context.Context, what string, err error) error {
	if conn.Err() != nil {
		return fail(ErrPodman, fmt.Sprintf("the call was cancelled: %s: %v", what, conn.Err()))
	}
	return fail(ErrPodman, fmt.Sprintf("%s: %v", what, err))
}

func hasAll(opts []string, want string) bool {
	for _, o := range opts {
		if o == want || strings.HasPrefix(o, want+"=true") || o == want+":true" {
			return true
		}
	}
	return false
}

// removeByNonce removes the containers labelled with nonce, with a
// context of its own: a cancelled create may have made one without
// brokerd learning its ID. Podman may still be finishing that create, so
// after a cancellation it looks again for a few seconds.
func (p *Podman) removeByNonce(conn context.Context, nonce string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(conn), removeWait)
	defer cancel()
	tries := 1
	if conn.Err() != nil {
		tries = 5
	}
	for i := range tries {
		if i > 0 {
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return
			}
		}
		list, err := containers.List(ctx, new(containers.ListOptions).WithAll(true).
			WithFilters(map[string][]string{"label": {LabelCall + "=" + nonce}}))
		if err != nil {
			p.log.Error("a failed create could not be checked for a container; brokerd removes any at its next start", "err", err.Error())
			return
		}
		for _, c := range list {
			p.remove(ctx, c.ID)
		}
		if len(list) > 0 {
			return
		}
	}
}

// remove kills and force-removes a container. It runs on every path out
// of a call, including a cancelled one, so it gets its own deadline.
func (p *Podman) remove(conn context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(conn), removeWait)
	defer cancel()
	_, err := containers.Remove(ctx, id, new(containers.RemoveOptions).WithForce(true).WithVolumes(true).WithTimeout(0))
	if err != nil && p.log != nil {
		p.log.Error("a tool container could not be removed; brokerd removes it at its next start", "id", id, "err", err.Error())
	}
}
