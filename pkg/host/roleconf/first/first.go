// Package first is the first config of each role, as `bxctl up` and
// `bxctl install` write it (and the NixOS module's deployment.json holds
// it): each is a value of the role's own config type (package
// roleconf/<role>) encoded as TOML, under a comment that says who wrote
// it and where every key is explained.
//
// Invariant: a first config is encoded from its role's Config type,
// never from a text template, and decodes with that role's own loader
// to exactly the value encoded: a key the type does not have cannot be
// written, and a value set (an owner_uid of 0 included) is never lost.
package first

import (
	"bytes"
	"encoding"
	"fmt"
	"reflect"
	"strings"

	"github.com/BurntSushi/toml"

	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/inferproxy"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/loopd"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd"
)

// Params are what the first configs depend on. No first config names a
// path of the state directory: each role takes those from the layout
// table in its state directory.
type Params struct {
	State     string // the state directory, absolute (bxctl up's Podman socket is in it)
	Llama     string // llama-server's host:port
	Model     string // the model's name for loopd
	ToolImage string // the tool image ID for brokerd's [runner]; "" for none
	// PodmanSocket is the Podman API socket brokerd's [runner] names:
	// "" for the service bxctl up runs in run/podman; bxctl install
	// names brokerd's own user's rootless Podman.
	PodmanSocket string
	// OwnerUID is the owner's uid with a user per role (brokerd's
	// owner_uid and loopd's [jobs] owner_uid: whose grants and jobs are
	// believed); nil with one user, where the daemons' own uid is the
	// owner's.
	OwnerUID *uint32
}

// File is one role's first config, at config/<Role>.toml. An existing
// file is the owner's and is never rewritten.
type File struct {
	Role string
	// Value is the role's config for p, a value of its Config type.
	Value func(p Params) any
	// Head is the comment above the keys, each line starting "# ".
	Head func(p Params) string
}

// Path is the config's path in state directory state.
func (f File) Path(state string) string { return layout.ConfigPath(state, f.Role) }

// Text is the config's text for p: Head, then Value encoded.
func (f File) Text(p Params) string {
	b, err := encode(f.Value(p))
	if err != nil {
		// The values are this package's own, of types the tests encode.
		panic(fmt.Sprintf("first config of %s: %v", f.Role, err))
	}
	return f.Head(p) + string(b)
}

// Configs is every first config.
var Configs = []File{
	{layout.Inferproxy, func(p Params) any {
		return inferproxy.Config{Upstream: p.Llama}
	}, func(Params) string { return written(layout.Inferproxy) }},
	{layout.Loopd, func(p Params) any {
		var c loopd.Config
		c.Model.Name = p.Model
		c.Jobs.OwnerUID = p.OwnerUID
		return c
	}, func(p Params) string {
		return written(layout.Loopd) + owner(p, "# [jobs] owner_uid: only job files this uid (or root) owns are run.\n")
	}},
	{layout.Brokerd, func(p Params) any {
		c := brokerd.Config{OwnerUID: p.OwnerUID}
		if p.ToolImage != "" {
			c.Runner = &brokerd.Runner{PodmanSocket: p.PodmanSocket, ToolImage: p.ToolImage}
			if p.PodmanSocket == "" {
				c.Runner.PodmanSocket = layout.PodmanRun.SocketIn(p.State)
			}
		}
		return c
	}, func(p Params) string {
		h := written(layout.Brokerd) +
			"# Put your grant files in grants/ (deploy/grants/README.md); with none, every tool call is denied.\n" +
			owner(p, "# owner_uid: only grant files this uid (or root) owns are believed.\n")
		switch {
		case p.ToolImage == "":
			h += "# No [runner]: tool calls fail until one is added (deploy/brokerd.toml);\n# `bxctl up --tool-image sha256:ID` on first run writes one.\n"
		case p.PodmanSocket != "":
			h += "# [runner]: brokerd's own user's rootless Podman (its user manager's podman.socket).\n"
		default:
			h += "# [runner]: bxctl up starts a Podman API service on this socket (logs/podman.log).\n"
		}
		return h
	}},
	{layout.Memoryd, func(p Params) any {
		return memoryd.Config{}
	}, func(Params) string { return written(layout.Memoryd) }},
}

// written is the first lines of every first config.
func written(role string) string {
	return "# Written by bxctl up; yours to edit (deploy/" + role + ".toml explains every key).\n" +
		"# Its sockets and state paths are the layout table's in this state directory: no key names them.\n"
}

// owner is line with a user per role; nothing with one user.
func owner(p Params, line string) string {
	if p.OwnerUID == nil {
		return ""
	}
	return line
}

// encode is v as TOML: every key v's type names that v sets. A field at
// its zero value is left out (absent decodes to the same zero), a nil
// pointer too; a pointer that is set is kept whatever it points to.
func encode(v any) ([]byte, error) {
	t, ok := table(reflect.ValueOf(v))
	if !ok {
		return nil, fmt.Errorf("%T is not a struct", v)
	}
	var b bytes.Buffer
	enc := toml.NewEncoder(&b)
	enc.Indent = ""
	if err := enc.Encode(t); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

var textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()

// table is struct v's set keys, by their toml tags; false if v is no
// struct.
func table(v reflect.Value) (map[string]any, bool) {
	if v.Kind() != reflect.Struct {
		return nil, false
	}
	m := map[string]any{}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if x, ok := value(v.Field(i)); ok {
			m[name] = x
		}
	}
	return m, true
}

// value is what v encodes as, and whether it is set at all.
func value(v reflect.Value) (any, bool) {
	switch {
	case v.Kind() == reflect.Pointer:
		if v.IsNil() {
			return nil, false
		}
		if t, ok := table(v.Elem()); ok && !v.Type().Implements(textMarshaler) {
			return t, true
		}
		return v.Elem().Interface(), true
	case v.Kind() == reflect.Struct && !v.Type().Implements(textMarshaler):
		t, _ := table(v)
		return t, len(t) > 0
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct:
		ts := make([]map[string]any, v.Len())
		for i := range ts {
			ts[i], _ = table(v.Index(i))
		}
		return ts, len(ts) > 0
	case v.IsZero(), (v.Kind() == reflect.Slice || v.Kind() == reflect.Map) && v.Len() == 0:
		return nil, false
	}
	return v.Interface(), true
}
