// Package toolinput is the envelope brokerd's runner writes to a tool
// container's stdin and the toolkit reads: the call's arguments and the one
// secret its grant injects, if any.
//
// Invariant: this is the only package that serialises a tool secret for
// the container ([Input.MarshalJSON] reveals it on purpose, for the
// container's stdin and nowhere else); inside the container only the
// toolkit's package tools reveals it again, to the 0400 secret file or as
// a bearer token (consult, a remote MCP server). [Decode] refuses anything
// but one strict object of
// the envelope's shape, never quoting its input. It is kept apart from the
// tool vocabulary (packages toolset and toolargs) so that a role that must
// never link the secret store, loopd, can share that vocabulary.
package toolinput

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"unicode/utf8"

	"wntrmute.dev/boxmaker/pkg/host/secret"
	"wntrmute.dev/boxmaker/pkg/socket/strict"
)

// MaxSize caps the envelope a tool container reads on stdin: the
// arguments (a write_file's content is the large case) and one secret.
const MaxSize = 16 << 20

// Input is the one JSON object brokerd's runner writes to a tool
// container's stdin, and the toolkit reads:
//
//	{"args": <the tool's arguments, as toolargs.Args.MarshalJSON writes them>,
//	 "secret": {"name": "NAME", "value": "..."}}
//
// secret is absent when the grant names none. The tool's name is not in
// the envelope: it is the container command's argument.
type Input struct {
	Args   json.RawMessage
	Secret *Secret
}

// Secret is the one secret a grant injects into a call.
type Secret struct {
	Name  string // matches [SecretNameRE]
	Value secret.Value
}

// SecretNameRE is the form of a secret's name; it becomes a file name in
// the container's private tmpfs.
var SecretNameRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)

type inputWire struct {
	Args   json.RawMessage `json:"args"`
	Secret *secretWire     `json:"secret,omitempty"`
}

type secretWire struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// MarshalJSON writes the envelope. It is the one place a tool secret is
// revealed on purpose: the runner writes the result to the container's
// stdin and nowhere else.
func (in Input) MarshalJSON() ([]byte, error) {
	if err := checkArgs(in.Args); err != nil {
		return nil, fmt.Errorf("marshal tool input: %w", err)
	}
	w := inputWire{Args: in.Args}
	if in.Secret != nil {
		if err := checkSecret(in.Secret.Name, in.Secret.Value); err != nil {
			return nil, fmt.Errorf("marshal tool input: %w", err)
		}
		w.Secret = &secretWire{in.Secret.Name, in.Secret.Value.Reveal()}
	}
	return strict.Marshal(w)
}

// Decode reads an envelope strictly (package strict: unknown,
// duplicate or missing keys refused) and checks its shape: args is a JSON
// object, the secret's name matches [SecretNameRE] and its value is
// neither empty nor over [secret.MaxSize]. The tool's arguments are left
// raw for toolargs.Parse. Errors never quote the input.
func Decode(data []byte) (Input, error) {
	if len(data) > MaxSize {
		return Input{}, fmt.Errorf("decode tool input: over %d bytes", MaxSize)
	}
	var w inputWire
	if err := strict.Unmarshal(data, &w); err != nil {
		var se *strict.Error
		if errors.As(err, &se) && se.Path != "" {
			return Input{}, fmt.Errorf("decode tool input: field %s refused", se.Path)
		}
		return Input{}, errors.New("decode tool input: not one strict JSON object")
	}
	if err := checkArgs(w.Args); err != nil {
		return Input{}, fmt.Errorf("decode tool input: %w", err)
	}
	in := Input{Args: w.Args}
	if w.Secret != nil {
		v := secret.New([]byte(w.Secret.Value))
		if err := checkSecret(w.Secret.Name, v); err != nil {
			return Input{}, fmt.Errorf("decode tool input: %w", err)
		}
		in.Secret = &Secret{w.Secret.Name, v}
	}
	return in, nil
}

func checkArgs(raw json.RawMessage) error {
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return errors.New("args is not a JSON object")
	}
	return nil
}

func checkSecret(name string, v secret.Value) error {
	switch {
	case !SecretNameRE.MatchString(name):
		return errors.New("secret name does not match ^[A-Z][A-Z0-9_]{0,63}$")
	case v.IsZero():
		return errors.New("secret value is empty")
	case len(v.Reveal()) > secret.MaxSize:
		return fmt.Errorf("secret value is over %d bytes", secret.MaxSize)
	case !utf8.ValidString(v.Reveal()):
		// JSON would replace the invalid bytes with U+FFFD: the tool
		// would get another value than the one stored.
		return errors.New("secret value is not valid UTF-8")
	}
	return nil
}
