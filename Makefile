# corral — see README.md. Every target that needs containerd runs
# hack/setup.sh first: it installs what is missing (Debian/Ubuntu, root)
# and starts a private containerd when none answers.
GO      ?= go
BIN     := build/corral
ENV     := . build/env && export CONTAINERD_ADDRESS &&
PKGS    := ./...

.PHONY: all setup build image demo test test-unit test-integration fuzz bench vet clean kube man \
	image-docker test-image test-docker test-ci-examples

all: build

setup:
	@hack/setup.sh

# corral version: git describe, the commit and its date, linked in
# (internal/version); the commit's date rather than the clock keeps builds
# reproducible.
VPKG    := github.com/corral-sandbox/corral/internal/version
LDFLAGS := -X $(VPKG).version=$(shell git describe --always --dirty 2>/dev/null) \
	-X $(VPKG).commit=$(shell git rev-parse HEAD 2>/dev/null) \
	-X $(VPKG).date=$(shell git log -1 --format=%cI 2>/dev/null)

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/corral
	CGO_ENABLED=0 $(GO) build -o build/corral-init ./cmd/corral-init
	CGO_ENABLED=0 $(GO) build -o build/corral-runsc ./cmd/corral-runsc

# One man page per command, from the commands' own help (cobra/doc), in
# build/man/. Shell completion comes from the binary: corral completion
# bash|zsh|fish.
man: build
	rm -rf build/man
	$(BIN) man build/man

image: setup build
	$(ENV) $(BIN) image build

demo: setup build
	$(ENV) hack/demo.sh $(BIN)

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet $(PKGS)
	$(GO) vet -tags kube,kubepod ./integration/ ./integration/kube/

# Unit tests need no daemon; integration tests (./integration) need root and
# containerd and fail instead of skipping when CI=true. The isolation tests,
# the hostile-case table and gc run under runc, crun and runsc (about three
# times their time alone; CORRAL_IT_RUNTIMES=runc narrows a local run).
test: setup vet build
	$(ENV) $(GO) test -count=1 -timeout 90m $(PKGS)
	$(MAKE) fuzz FUZZTIME=20000x

test-unit:
	$(GO) test -count=1 $$($(GO) list ./... | grep -v /integration)

test-integration: setup
	$(ENV) $(GO) test -count=1 -timeout 90m -v ./integration/

# A count (NNNx), not a duration, in make test: with a duration the fuzzing
# coordinator's deadline can end while a worker minimises a new input on a
# loaded machine, and go test reports "context deadline exceeded" as a
# failure that found nothing.
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzCheck$$' -fuzztime $(FUZZTIME) ./allowlist/
	$(GO) test -run '^$$' -fuzz '^FuzzCleanPath$$' -fuzztime $(FUZZTIME) ./allowlist/

# One table: corral next to ctr run --rm, runc run and bwrap, measured in
# the same run, with each issue-6 target met or missed (build/bench.md).
bench: setup build
	$(ENV) CORRAL_BENCH_OUT=$(CURDIR)/build/bench.md $(GO) test -run '^$$' -bench '^BenchmarkCompare$$' -benchtime 1x -timeout 60m ./integration/

# Docker's containerd: dockerd started by hand (no bridge, no iptables
# rules), the isolation, hostile-case and session tests against its
# containerd in the namespace corral-test, then dockerd stopped and nothing
# left behind (hack/test-docker.sh).
test-docker: vet build
	hack/setup.sh docker
	hack/test-docker.sh

# corral's image from the top-level Dockerfile, with no registry: a Debian
# base made here (debootstrap), buildah build (hack/corral-image.sh).
DOCKER_IMAGE ?= localhost/corral:dev
image-docker:
	hack/setup.sh image
	IMAGE=$(DOCKER_IMAGE) hack/corral-image.sh build

# The image run as a CI job: loaded into Docker, the demo inside with its
# own containerd.
test-image: image-docker
	IMAGE=$(DOCKER_IMAGE) hack/corral-image.sh load
	IMAGE=$(DOCKER_IMAGE) hack/corral-image.sh run
	hack/docker-containerd.sh stop

# docs/examples/*.yml run step by step (integration/ciexamples_test.go):
# the GitHub Actions job on this machine's containerd, the GitLab CI job in
# the image (after test-image).
test-ci-examples: setup image-docker
	IMAGE=$(DOCKER_IMAGE) hack/corral-image.sh load
	$(ENV) CORRAL_CI_IMAGE=$(DOCKER_IMAGE) DOCKER_HOST=$$(hack/docker-containerd.sh docker) \
		$(GO) test -tags ciexamples -count=1 -timeout 30m -run '^TestCIExample' -v ./integration/
	hack/docker-containerd.sh stop

# A real single-node Kubernetes in namespaces of its own (hack/kube/README.md).
# The first run builds kubelet & co. from Go modules (15 min on 2 idle cores,
# an hour on a busy machine), cached under /var/cache/corral-kube after that;
# then the smoke test, the Go cluster tests and BenchmarkPodCall, whose
# table (a Pod's call against the host's, target met or missed) goes to
# build/bench-kube.md. Not part of `make test`.
kube:
	hack/kube/smoke.sh
	mkdir -p build
	CORRAL_BENCH_OUT=$(CURDIR)/build/bench-kube.md $(GO) test -tags kube -count=1 -timeout 30m -v \
		-bench '^BenchmarkPodCall$$' -benchtime 1x ./integration/kube/

clean:
	rm -rf build
