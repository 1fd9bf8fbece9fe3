package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
)

// Podman is reached with plain HTTP over its API socket, not through the
// Podman bindings: only brokerd's runner may import them (checks/arch),
// and doctor needs two read-only GETs. Each runs under the probe deadline.
//
// Doctor does not run brokerd's startup probe (a container would be
// starting something) and brokerd records the probe's result nowhere but
// its log. What it can read is what the probe depends on, from Podman's
// own /info: the major version, seccomp, and whether a rootless service
// gets the memory and pids controllers (cgroups v2, delegated) without
// which Podman drops the tool containers' limits with only a warning
// (docs/runbook.md: runner-isolation-lost). brokerd's probe stays the
// authority: it refuses to start on what it sees from inside.

// podmanInfo is the part of GET /libpod/info doctor reads (Podman's
// libpod/define.Info: host.cgroupVersion, host.cgroupControllers,
// host.security, version.Version).
type podmanInfo struct {
	Host struct {
		CgroupVersion     string   `json:"cgroupVersion"`
		CgroupControllers []string `json:"cgroupControllers"`
		Security          struct {
			Rootless       bool `json:"rootless"`
			SECCOMPEnabled bool `json:"seccompEnabled"`
		} `json:"security"`
	} `json:"host"`
	Version struct {
		Version string `json:"Version"`
	} `json:"version"`
}

// podmanImage is the part of GET /libpod/images/{id}/json doctor reads.
type podmanImage struct {
	ID string `json:"Id"`
}

// maxPodmanBody caps an answer: /info is a few KiB.
const maxPodmanBody = 1 << 20

// errNotFound is a 404 from Podman.
type errNotFound struct{}

func (errNotFound) Error() string { return "not found" }

// podmanGet GETs path from the API service on sock into out.
func podmanGet(ctx context.Context, sock, path string, out any) error {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://d/v5.0.0/libpod"+path, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPodmanBody))
	if err != nil {
		return err
	}
	if resp.StatusCode == http.StatusNotFound {
		return errNotFound{}
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s answered %s", path, resp.Status)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("GET %s: %v", path, err)
	}
	return nil
}

// podman checks the API service brokerd.toml's [runner] names, the tool
// image in it, and the limits it can apply.
func (a *auditor) podman(in *install) {
	if !in.has("brokerd") {
		return
	}
	r := in.broker.Runner
	if r == nil {
		a.add("doctor-podman", Warn, "brokerd.toml has no [runner]: every allowed tool call fails")
		return
	}
	sock := filepath.Clean(strings.TrimPrefix(r.PodmanSocket, "unix://"))
	ctx, cancel := a.probe()
	defer cancel()
	var info podmanInfo
	if err := podmanGet(ctx, sock, "/info", &info); err != nil {
		a.add("doctor-podman", Problem, "the Podman API service on %s did not answer GET /info within %v: %v", sock, a.opt.Probe, err)
		return
	}
	if major, _, _ := strings.Cut(info.Version.Version, "."); major != "5" {
		a.add("doctor-podman", Problem, "the service on %s is Podman %q; brokerd needs Podman 5", sock, info.Version.Version)
	} else {
		a.add("doctor-podman", OK, "Podman %s answers on %s", info.Version.Version, sock)
	}
	a.podmanLimits(sock, info)
	a.toolImage(sock, r.ToolImage)
}

func (a *auditor) podmanLimits(sock string, info podmanInfo) {
	h := info.Host
	var problems []string
	if !h.Security.SECCOMPEnabled {
		problems = append(problems, "it reports no seccomp support: tool containers would run without a syscall filter")
	}
	mode := "rootful"
	if h.Security.Rootless {
		mode = "rootless"
		var missing []string
		for _, c := range []string{"memory", "pids"} {
			if !slices.Contains(h.CgroupControllers, c) {
				missing = append(missing, c)
			}
		}
		switch {
		case h.CgroupVersion != "v2":
			problems = append(problems, fmt.Sprintf("it is rootless on cgroups %s, where Podman drops the memory and pids limits with only a warning", h.CgroupVersion))
		case len(missing) > 0:
			problems = append(problems, fmt.Sprintf("it is rootless without the %s controllers delegated, so Podman drops those limits with only a warning", strings.Join(missing, " and ")))
		}
	}
	if len(problems) > 0 {
		a.add("doctor-podman-limits", Problem, "the Podman service on %s: %s", sock, strings.Join(problems, "; "))
		return
	}
	a.add("doctor-podman-limits", OK, "%s, cgroups %s (controllers %s), seccomp on: the limits brokerd asks for can be applied (its startup probe checks them from inside a container)",
		mode, h.CgroupVersion, strings.Join(h.CgroupControllers, " "))
}

func (a *auditor) toolImage(sock, id string) {
	hexID, ok := strings.CutPrefix(id, "sha256:")
	if !ok || len(hexID) != 64 || strings.Trim(hexID, "0123456789abcdef") != "" {
		a.add("doctor-tool-image", Problem, "brokerd.toml's tool_image %q is not sha256: and 64 hex digits", id)
		return
	}
	ctx, cancel := a.probe()
	defer cancel()
	var img podmanImage
	switch err := podmanGet(ctx, sock, "/images/"+hexID+"/json", &img); {
	case err == (errNotFound{}):
		a.add("doctor-tool-image", Problem, "the tool image %s is not in the storage of the Podman service on %s (it is never pulled)", id, sock)
	case err != nil:
		a.add("doctor-tool-image", Problem, "the Podman service on %s did not say whether it has %s within %v: %v", sock, id, a.opt.Probe, err)
	case strings.TrimPrefix(img.ID, "sha256:") != hexID:
		a.add("doctor-tool-image", Problem, "asked for %s, the Podman service on %s answered with image %s: the recorded ID is not the image's", id, sock, img.ID)
	default:
		a.add("doctor-tool-image", OK, "the tool image %s is present and its ID matches brokerd.toml", id)
	}
}
