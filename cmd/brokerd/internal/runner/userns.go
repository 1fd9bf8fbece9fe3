package runner

import (
	"github.com/containers/podman/v5/pkg/specgen"
	"go.podman.io/storage/types"
)

// autoSize is the size of a rootful call's user namespace: the ids 0 to
// 65535, so that 65534 is inside it.
const autoSize = 65536

// userNS is a container's user namespace. Rootless, keep-id maps the
// container's 65534 to brokerd's own user, so a tool reads and writes
// granted paths as that user. Rootful, "auto" gives every container a
// range of its own from the subordinate ids of the user `containers`
// (/etc/subuid, /etc/subgid): a call's 65534 is a host uid no other
// call, and no host daemon running as nobody, shares.
// The API takes the mode and, for auto, the mapping request that
// Podman's command line would otherwise compute on the client.
func userNS(s *specgen.SpecGenerator, rootless bool) {
	if rootless {
		s.UserNS = specgen.Namespace{NSMode: specgen.KeepID, Value: "uid=65534,gid=65534"}
		return
	}
	s.UserNS = specgen.Namespace{NSMode: specgen.Auto}
	s.IDMappings = &types.IDMappingOptions{AutoUserNs: true, AutoUserNsOpts: types.AutoUserNsOptions{Size: autoSize}}
}
