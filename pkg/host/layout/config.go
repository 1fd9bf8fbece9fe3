package layout

import (
	"fmt"
	"path/filepath"
)

// Params are what the first configs depend on besides the state
// directory's own paths.
type Params struct {
	State     string // the state directory, absolute
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

// FirstConfig is one role's config as `bxctl up` writes it on first run,
// at config/<Role>.toml. An existing file is the owner's and is never
// rewritten.
type FirstConfig struct {
	Role string
	Text func(Params) string
}

// Path is the config's path in state directory state.
func (c FirstConfig) Path(state string) string { return ConfigPath(state, c.Role) }

// ConfigPath is role's config in state directory state (gatewayd's too,
// which bxctl cannot write: it needs the owner's Mattermost details).
func ConfigPath(state, role string) string { return filepath.Join(Config.In(state), role+".toml") }

// FirstConfigs is every config `bxctl up` writes.
var FirstConfigs = []FirstConfig{
	{"inferproxy", func(p Params) string {
		return fmt.Sprintf("# Written by bxctl up; yours to edit (deploy/inferproxy.toml explains every key).\nsocket_dir = %q\nupstream = %q\n",
			InferRun.In(p.State), p.Llama)
	}},
	{"loopd", func(p Params) string {
		return fmt.Sprintf("# Written by bxctl up; yours to edit (deploy/loopd.toml explains every key).\nstate_dir = %q\nsocket_dir = %q\ninfer_socket = %q\nbroker_socket = %q\nmemory_socket = %q\n\n[model]\nname = %q\n",
			p.State, LoopRun.In(p.State), InferRun.SocketIn(p.State), BrokerRun.SocketIn(p.State), MemoryRun.SocketIn(p.State), p.Model) + ownerLine(p, "\n[jobs]\n# Only job files this uid (or root) owns are run.\n")
	}},
	{"brokerd", func(p Params) string {
		// gateway_socket is a top-level key: before any table.
		return fmt.Sprintf("# brokerd's courier posts pending approvals to gatewayd here.\ngateway_socket = %q\n", GatewayRun.SocketIn(p.State)) +
			fmt.Sprintf("# Written by bxctl up; yours to edit (deploy/brokerd.toml explains every key).\n# Put your grant files in grants_dir (deploy/grants/README.md); with none, every tool call is denied.\nstate_dir = %q\ngrants_dir = %q\nbroker_socket_dir = %q\nadmin_socket_dir = %q\nmemtool_socket = %q\n# memoryd asks each session's state here (the clean-turn gate).\ngate_socket_dir = %q\n",
				p.State, Grants.In(p.State), BrokerRun.In(p.State), AdminRun.In(p.State), MemtoolRun.SocketIn(p.State), GateRun.In(p.State)) +
			ownerLine(p, "# Only grant files this uid (or root) owns are believed.\n") + runnerTable(p)
	}},
	{"memoryd", func(p Params) string {
		return fmt.Sprintf("# Written by bxctl up; yours to edit (deploy/memoryd.toml explains every key).\nstate_dir = %q\nmemory_socket_dir = %q\nmemtool_socket_dir = %q\nadmin_socket_dir = %q\n# gatewayd's way in for the owner's !why and !forget.\nchat_socket_dir = %q\n# brokerd's gate.sock: each session's state, for the clean-turn gate.\ngate_socket = %q\n",
			p.State, MemoryRun.In(p.State), MemtoolRun.In(p.State), MemadminRun.In(p.State), MemchatRun.In(p.State), GateRun.SocketIn(p.State))
	}},
}

// ownerLine is owner_uid after head, with a user per role; nothing with
// one user.
func ownerLine(p Params, head string) string {
	if p.OwnerUID == nil {
		return ""
	}
	return fmt.Sprintf("%sowner_uid = %d\n", head, *p.OwnerUID)
}

// runnerTable is the [runner] table of brokerd's first config: bxctl's
// own Podman service and the tool image by ID; a comment without an image.
func runnerTable(p Params) string {
	if p.ToolImage == "" {
		return "\n# No [runner]: tool calls fail until one is added (deploy/brokerd.toml);\n# `bxctl up --tool-image sha256:ID` on first run writes one.\n"
	}
	if p.PodmanSocket != "" {
		return fmt.Sprintf("\n# brokerd's own user's rootless Podman (its user manager's podman.socket).\n[runner]\npodman_socket = %q\ntool_image = %q\n",
			p.PodmanSocket, p.ToolImage)
	}
	return fmt.Sprintf("\n# bxctl up starts a Podman API service on this socket (logs/podman.log).\n[runner]\npodman_socket = %q\ntool_image = %q\n",
		PodmanRun.SocketIn(p.State), p.ToolImage)
}
