package secret

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// Backend is where a secret is kept.
type Backend uint8

// The backends. Credential is the default: systemd encrypts it at rest to
// the host's TPM and key, and hands it only to the one service. The other
// two keep the secret in plaintext and exist for portability.
const (
	Credential Backend = iota + 1 // $CREDENTIALS_DIRECTORY/<name>
	Env                           // an environment variable
	File                          // a file only the owner can read
)

// MaxSize caps a secret; credentials are tokens, not files.
const MaxSize = 64 << 10

// Ref names one secret and its backend. It is parsed from config text:
// "NAME" or "credential:NAME", "env:NAME", "file:/absolute/path". A Ref
// holds no secret and may be printed and logged.
type Ref struct {
	backend Backend
	name    string
}

// ParseRef parses a secret reference. Its errors never quote the text:
// a malformed ref is often the secret itself pasted in its place.
func ParseRef(s string) (Ref, error) {
	kind, name, found := strings.Cut(s, ":")
	if !found {
		kind, name = "credential", s
	}
	var r Ref
	switch kind {
	case "credential":
		r.backend = Credential
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
			return Ref{}, errors.New("parse secret ref: a credential name is one path element")
		}
	case "env":
		r.backend = Env
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return Ref{}, errors.New("parse secret ref: bad environment variable name")
		}
	case "file":
		r.backend = File
		if !filepath.IsAbs(name) || strings.ContainsRune(name, 0) {
			return Ref{}, errors.New("parse secret ref: a file secret needs an absolute path")
		}
	default:
		return Ref{}, errors.New("parse secret ref: the backend is not credential, env or file")
	}
	r.name = name
	return r, nil
}

// Backend is the ref's backend.
func (r Ref) Backend() Backend { return r.backend }

func (r Ref) String() string {
	switch r.backend {
	case Credential:
		return "credential:" + r.name
	case Env:
		return "env:" + r.name
	case File:
		return "file:" + r.name
	}
	return "(no secret)"
}

// UnmarshalText parses a Ref from config.
func (r *Ref) UnmarshalText(b []byte) error {
	v, err := ParseRef(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// MarshalText writes the Ref (not the secret).
func (r Ref) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// Store loads secrets. Make it with [NewStore].
type Store struct {
	credDir string
	log     *slog.Logger

	mu  sync.Mutex
	env map[string]Value // environment secrets read so far: gone from the environment
}

// NewStore reads $CREDENTIALS_DIRECTORY, which systemd sets for a service
// with LoadCredential= or LoadCredentialEncrypted=.
func NewStore(log *slog.Logger) *Store {
	return &Store{credDir: os.Getenv("CREDENTIALS_DIRECTORY"), log: log}
}

// Load reads the secret r names. A file secret logs a warning, because it
// sits in plaintext on disk. An environment secret is removed from the
// environment once read, so child processes do not inherit it, and kept
// by the Store, so a later Load of it (brokerd loads a tool's secret for
// every call) still finds it. A single
// trailing newline is dropped (files written by echo have one); an empty
// secret is an error.
func (s *Store) Load(r Ref) (Value, error) {
	var b []byte
	var err error
	switch r.backend {
	case Credential:
		if s.credDir == "" {
			return Value{}, fmt.Errorf("load secret %s: CREDENTIALS_DIRECTORY is not set (is the service started with LoadCredential=?); see docs/runbook.md#secret-missing", r)
		}
		b, err = readFile(filepath.Join(s.credDir, r.name), false)
	case Env:
		s.mu.Lock()
		defer s.mu.Unlock()
		if v, ok := s.env[r.name]; ok {
			return v, nil
		}
		v, ok := os.LookupEnv(r.name)
		if !ok {
			return Value{}, fmt.Errorf("load secret %s: the variable is not set; see docs/runbook.md#secret-missing", r)
		}
		b = []byte(v)
		os.Unsetenv(r.name)
	case File:
		b, err = readFile(r.name, true)
		if err == nil {
			s.log.Warn("secret read from a plaintext file; prefer a systemd credential", "secret", r.String())
		}
	default:
		return Value{}, errors.New("load secret: empty reference")
	}
	if err != nil {
		return Value{}, fmt.Errorf("load secret %s: %w", r, err)
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	if len(b) == 0 {
		return Value{}, fmt.Errorf("load secret %s: it is empty; see docs/runbook.md#secret-missing", r)
	}
	v := New(b)
	clear(b)
	if r.backend == Env { // s.mu is held
		if s.env == nil {
			s.env = map[string]Value{}
		}
		s.env[r.name] = v
	}
	return v, nil
}

// readFile reads a secret file without following a link. With ownerOnly
// it refuses a file not owned by this process's user or readable by
// anyone else: a plaintext secret others can read is already leaked, and
// using it would hide that.
func readFile(path string, ownerOnly bool) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("%w; see docs/runbook.md#secret-missing", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file; see docs/runbook.md#secret-file-mode", path)
	}
	if ownerOnly {
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || int(st.Uid) != os.Geteuid() {
			return nil, fmt.Errorf("%s is not owned by this user (uid %d); see docs/runbook.md#secret-file-mode", path, os.Geteuid())
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			return nil, fmt.Errorf("%s has mode %04o; group and others must have no access (chmod 600); see docs/runbook.md#secret-file-mode", path, perm)
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxSize {
		clear(b)
		return nil, fmt.Errorf("%s is larger than %d bytes", path, MaxSize)
	}
	return b, nil
}
