# Boxmaker's make targets. `make test` is the README's test command and what
# .ci/run calls; it installs what a bare Debian 12 machine lacks and then runs
# the offline gate.

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME ?= 60s
# The gate must not reach the network: everything it needs was fetched by
# `make setup`, and the module cache itself serves as the only proxy.
OFFLINE := GOPROXY=file://$(shell go env GOMODCACHE)/cache/download GOSUMDB=off
# The build tags of Podman's bindings (brokerd's runner), for every
# command that compiles the whole tree; cmd/brokerd/tags.txt is the one
# list (checks/arch reads it too).
empty :=
space := $(empty) $(empty)
comma := ,
BUILD_TAGS := $(strip $(shell cat cmd/brokerd/tags.txt 2>/dev/null))
TAGS := $(if $(BUILD_TAGS),-tags $(subst $(space),$(comma),$(BUILD_TAGS)))

.PHONY: test setup gate fmt vet staticcheck race sandbox sandbox-full deps fuzz build up clean vm

test: setup gate vm

setup:
	checks/setup

gate: fmt vet staticcheck race sandbox

fmt:
	@out=$$(find . -name '*.go' -not -path './.*' -print0 | xargs -0 -r gofmt -l); \
	if [ -n "$$out" ]; then echo "gofmt: these files are not formatted:"; echo "$$out"; exit 1; fi

vet:
	$(OFFLINE) go vet $(TAGS) ./...

staticcheck:
	$(OFFLINE) go run $(STATICCHECK) $(TAGS) ./...

# Every test, with the race detector, including the architecture checks in
# checks/arch (file length, imports, package docs, runbook anchors,
# per-binary dependency lists, documented modules), and the real-container
# tests against the Podman that checks/setup built (checks/podmantest).
#
# RACE_TIMEOUT is every package's time limit (go test -timeout), set here
# rather than left at go test's 10 minutes: the slowest packages
# (checks/stack, checks/roleimage, checks/arch, cmd/brokerd) must take at most
# half of it here (2 cores, cold caches, another gate running beside);
# docs/test-times.md lists what each took.
RACE_TIMEOUT ?= 30m
# The first line compiles every role as checks/stack and images/role-image
# build them (static, -trimpath; brokerd's tags) outside any package's
# time limit: cold, the two packages otherwise compiled Podman's bindings
# at the same time, each inside its own limit. (A module without cmd/,
# as checks/arch plants, skips it.)
race:
	$(if $(wildcard cmd),$(OFFLINE) CGO_ENABLED=0 go build -trimpath -buildvcs=false $(TAGS) ./cmd/...)
	$(OFFLINE) CGO_ENABLED=1 go test $(TAGS) -race -count=1 -timeout $(RACE_TIMEOUT) ./...

# The approximation of the Nix sandbox (checks/nix/sandbox, docs/nix.md):
# a root laid out as Nix's (/ nobody's, /build as TMPDIR, no /usr/bin),
# vendored modules, no network, only the derivation's tools, the build
# user alone. `sandbox` (in the gate) proves its walls: a planted vendor/
# walk and a planted download must fail there. `sandbox-full` also runs
# the flake's checks.gate phases (nix/gate-check.sh) in it first: about
# 4 minutes warm but 15 to 25 cold, so it is run by hand (before merging
# new tests or changes to nix/) rather than in every cold `make test`.
sandbox:
	bash checks/nix/sandbox --plants-only

sandbox-full:
	bash checks/nix/sandbox

# The VM test host (checks/vm, docs/vm.md): builds a Debian 12 guest
# (cached in ~/.cache/boxmaker/vm) and boots it under qemu's software
# emulation. Not part of the gate: without BOXMAKER_VM=1 its tests skip.
# Needs root and checks/vm-setup's tools; with CI set, a machine that
# cannot boot the guest fails.
vm:
	$(OFFLINE) BOXMAKER_VM=1 go test $(TAGS) -count=1 -v -timeout 45m ./checks/vm/...

# Rewrite cmd/*/deps.txt after reviewing a dependency change.
deps:
	go test ./checks/arch -run TestRepoDeps -update

# Run every fuzz target for FUZZTIME (60 s by default) each.
fuzz:
	checks/fuzz $(FUZZTIME)

build:
	CGO_ENABLED=0 go build $(TAGS) -trimpath -o bin/ ./cmd/...

# The main job: every role that exists, from ./.boxmaker (or $BOXMAKER_STATE),
# against llama-server at $LLAMA (default 127.0.0.1:8080). Chat with
# bin/bxctl chat.
LLAMA ?= 127.0.0.1:8080
up: build
	bin/bxctl up --llama $(LLAMA)

clean:
	rm -rf bin
