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

	"wntrmute.dev/boxmaker/pkg/config"
	"wntrmute.dev/boxmaker/pkg/layout"
)

// The role configs are each role's own (cmd/<role>/internal, which bxctl
// cannot import), so doctor reads only the keys it audits, as bxctl up
// reads podman_socket; each daemon checks its whole file strictly when it
// starts. A key doctor does not know is not an error here: the daemon
// refuses it, and doctor-egress looks at every value for addresses.

type inferCfg struct {
	SocketDir string   `toml:"socket_dir"`
	AllowUIDs []uint32 `toml:"allow_uids"`
	Upstream  string   `toml:"upstream"`
}

type loopCfg struct {
	StateDir  string   `toml:"state_dir"`
	AllowUIDs []uint32 `toml:"allow_uids"`
	Model     struct {
		Name     string `toml:"name"`
		MainSlot int    `toml:"main_slot"`
	} `toml:"model"`
	Serving struct {
		NCtx           int    `toml:"n_ctx"`
		Slots          int    `toml:"slots"`
		TemplateSHA256 string `toml:"template_sha256"`
	} `toml:"serving"`
}

type brokerCfg struct {
	StateDir         string   `toml:"state_dir"`
	GrantsDir        string   `toml:"grants_dir"`
	OwnerUID         *uint32  `toml:"owner_uid"`
	BrokerAllowUIDs  []uint32 `toml:"broker_allow_uids"`
	AdminAllowUIDs   []uint32 `toml:"admin_allow_uids"`
	GatewayAllowUIDs []uint32 `toml:"gateway_allow_uids"`
	GateAllowUIDs    []uint32 `toml:"gate_allow_uids"`
	Runner           *struct {
		PodmanSocket string `toml:"podman_socket"`
		ToolImage    string `toml:"tool_image"`
	} `toml:"runner"`
	Secrets map[string]string `toml:"secrets"`
}

type memCfg struct {
	StateDir         string   `toml:"state_dir"`
	MemoryAllowUIDs  []uint32 `toml:"memory_allow_uids"`
	MemtoolAllowUIDs []uint32 `toml:"memtool_allow_uids"`
	AdminAllowUIDs   []uint32 `toml:"admin_allow_uids"`
	GateListenerUIDs []uint32 `toml:"gate_listener_uids"`
}

type gatewayCfg struct {
	URL       string   `toml:"url"`
	Token     string   `toml:"token"`
	AllowUIDs []uint32 `toml:"allow_uids"`
}

// roleConfig is one config file doctor reads.
type roleConfig struct {
	role     string
	optional bool // gatewayd's: bxctl up never writes one
	into     any
}

// install is what doctor read of an installation.
type install struct {
	state   string
	infer   inferCfg
	loop    loopCfg
	broker  brokerCfg
	mem     memCfg
	gateway *gatewayCfg // nil: no gatewayd.toml
	// raw is each config read, decoded without a schema (doctor-egress).
	raw map[string]map[string]any
	// bad is each config that could not be read, and why.
	bad map[string]error
	// absent lists the optional configs that do not exist.
	absent []string
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
	in := &install{state: state, raw: map[string]map[string]any{}, bad: map[string]error{}}
	gw := &gatewayCfg{}
	for _, c := range []roleConfig{
		{"inferproxy", false, &in.infer}, {"loopd", false, &in.loop}, {"brokerd", false, &in.broker},
		{"memoryd", false, &in.mem}, {"gatewayd", true, gw},
	} {
		path := layout.ConfigPath(state, c.role)
		data, err := readCapped(path, config.MaxSize)
		if errors.Is(err, fs.ErrNotExist) && c.optional {
			in.absent = append(in.absent, c.role)
			continue
		}
		if err == nil {
			err = decode(data, c.into, in, c.role)
		}
		if err != nil {
			in.bad[c.role] = err
		}
	}
	if _, ok := in.raw["gatewayd"]; ok {
		in.gateway = gw
	}
	return in, nil
}

func decode(data []byte, into any, in *install, role string) error {
	if _, err := toml.Decode(string(data), into); err != nil {
		return err
	}
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
	msg := fmt.Sprintf("%d configs read from %s", len(in.raw), layout.Config.In(in.state))
	if len(in.absent) > 0 {
		msg += fmt.Sprintf(" (no %s.toml: that role is not configured)", strings.Join(in.absent, ".toml, no "))
	}
	a.add("doctor-config", OK, "%s", msg)
}
