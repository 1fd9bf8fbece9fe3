package cli

import (
	"fmt"
	"path/filepath"
)

// memoryd's part of a state directory and of the configs `bxctl up`
// writes: its three sockets, each in a directory of its own.

func memorySocket(state string) string {
	return filepath.Join(socketDir(state, "memory"), "memory.sock")
}
func memtoolSocket(state string) string {
	return filepath.Join(socketDir(state, "memtool"), "memtool.sock")
}
func memadminSocket(state string) string {
	return filepath.Join(socketDir(state, "memadmin"), "memadmin.sock")
}

// memoryPairs are memoryd's socket directories.
var memoryPairs = []string{"memory", "memtool", "memadmin"}

// memorydConfig is memoryd's first config.
func memorydConfig(state string) string {
	return fmt.Sprintf("# Written by bxctl up; yours to edit (deploy/memoryd.toml explains every key).\nstate_dir = %q\nmemory_socket_dir = %q\nmemtool_socket_dir = %q\nadmin_socket_dir = %q\n",
		state, socketDir(state, "memory"), socketDir(state, "memtool"), socketDir(state, "memadmin"))
}
