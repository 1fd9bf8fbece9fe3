package doctor

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/BurntSushi/toml"

	"wntrmute.dev/boxmaker/pkg/host/config"
	"wntrmute.dev/boxmaker/pkg/host/layout"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/brokerd"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/gatewayd"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/inferproxy"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/loopd"
	"wntrmute.dev/boxmaker/pkg/host/roleconf/memoryd"
)

// Each role's config is judged by that role's own loader (package
// roleconf/<role>: the code the daemon runs at start), so a config the
// daemon refuses is a doctor-config problem, never "ok".

// roleConfig is one config file doctor reads: parse is the role's own
// loader's Parse, its checks included.
type roleConfig struct {
	role     string
	optional bool // gatewayd's: bxctl up never writes one
	parse    func(data []byte, name string) ([]string, error)
}

// install is what doctor read of an installation.
type install struct {
	state   string
	infer   inferproxy.Config
	loop    loopd.Config
	broker  brokerd.Config
	mem     memoryd.Config
	gateway *gatewayd.Config // nil: no gatewayd.toml, or one its loader refused
	// raw is each config read, decoded without a schema (doctor-egress).
	raw map[string]map[string]any
	// bad is each config that could not be read, and why.
	bad map[string]error
	// absent lists the optional configs that do not exist.
	absent []string
	// leftover are the keys configs still hold that the layout table
	// decides, each with the table's own value (accepted, to delete).
	leftover []string
}

// has is whether role's config was read.
func (in *install) has(role string) bool { _, ok := in.raw[role]; return ok }

// readInstall reads the state directory's configs. Only a state
// directory that is not there (or not a directory) stops the doctor.
func readInstall(state string) (*install, error) {
	fi, err := os.Stat(state)
	if err != nil {
		return nil, fmt.Errorf("doctor: no state directory to audit: %v (give --state DIR, or set $BOXMAKER_STATE)", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("doctor: %s is not a directory", state)
	}
	if abs, err := filepath.Abs(state); err == nil {
		state = abs // the roles' paths are the table's under it
	}
	in := &install{state: state, raw: map[string]map[string]any{}, bad: map[string]error{}}
	for _, c := range []roleConfig{
		{"inferproxy", false, func(data []byte, name string) (l []string, err error) {
			in.infer, l, err = inferproxy.Parse(data, name, state)
			return l, err
		}},
		{"loopd", false, func(data []byte, name string) (l []string, err error) {
			in.loop, l, err = loopd.Parse(data, name, state)
			return l, err
		}},
		{"brokerd", false, func(data []byte, name string) (l []string, err error) {
			in.broker, l, err = brokerd.Parse(data, name, state)
			return l, err
		}},
		{"memoryd", false, func(data []byte, name string) (l []string, err error) {
			in.mem, l, err = memoryd.Parse(data, name, state)
			return l, err
		}},
		{"gatewayd", true, func(data []byte, name string) ([]string, error) {
			gw, l, err := gatewayd.Parse(data, name, state)
			if err == nil {
				in.gateway = &gw
			}
			return l, err
		}},
	} {
		path := layout.ConfigPath(state, c.role)
		data, err := readCapped(path, config.MaxSize)
		if errors.Is(err, fs.ErrNotExist) && c.optional {
			in.absent = append(in.absent, c.role)
			continue
		}
		if err == nil {
			err = decode(data, c.parse, in, c.role, path)
		}
		if err != nil {
			in.bad[c.role] = err
		}
	}
	return in, nil
}

// decode runs the role's parse over data and, if it accepts, keeps the
// schemaless decode for doctor-egress; a refused config is recorded
// only as bad, so no check reads half of it.
func decode(data []byte, parse func([]byte, string) ([]string, error), in *install, role, path string) error {
	leftover, err := parse(data, path)
	if err != nil {
		return err
	}
	in.leftover = append(in.leftover, leftover...)
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		return err
	}
	in.raw[role] = raw
	return nil
}

// readCapped reads at most max bytes of path, refusing a larger file
// and anything but a regular file. The open does not block: a FIFO
// planted where a config goes must not hang the doctor.
func readCapped(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", typeName(fi.Mode()))
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	return b, nil
}

// configs reports each config doctor could not read.
func (a *auditor) configs(in *install) {
	var problems []string
	for _, role := range []string{"inferproxy", "loopd", "brokerd", "memoryd", "gatewayd"} {
		if err, ok := in.bad[role]; ok {
			problems = append(problems, fmt.Sprintf("%s: %v", filepath.Base(layout.ConfigPath(in.state, role)), err))
		}
	}
	if len(problems) > 0 {
		a.add("doctor-config", Problem, "%s (the checks that need them are skipped)", strings.Join(problems, "; "))
		return
	}
	if len(in.leftover) > 0 {
		a.add("doctor-config", Warn, "%s", strings.Join(in.leftover, "; "))
		return
	}
	msg := fmt.Sprintf("%d configs read from %s", len(in.raw), layout.Config.In(in.state))
	if len(in.absent) > 0 {
		msg += fmt.Sprintf(" (no %s.toml: that role is not configured)", strings.Join(in.absent, ".toml, no "))
	}
	a.add("doctor-config", OK, "%s", msg)
}
