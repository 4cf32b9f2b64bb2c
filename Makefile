# Penguin's build. `make run` runs it, `make test` tests it.
#
# Codegen and lint tools are pinned in tools/go.mod and run with `go tool`,
# so nothing needs installing beyond Go and the module cache.

GO          ?= go
TOOL        := $(GO) tool -modfile=tools/go.mod
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS     := -X main.version=$(VERSION)
PKGS        ?= ./...
TEST_FLAGS  ?=
TEST_TIMEOUT ?= 20m
BENCHTIME   ?= 1s

# Go files that gofmt must leave alone: everything but hidden directories
# (.git, caches) and testdata.
GO_FILES = $(shell find . -path './.*' -prune -o -name testdata -prune -o -name '*.go' -print)
# Packages with at least one benchmark.
BENCH_PKGS = $(sort $(dir $(shell grep -rl --include='*_test.go' -e '^func Benchmark' . 2>/dev/null)))

.PHONY: all build test lint generate bench run demo web web-check web-e2e images k8s-test k8s-soak cross dist dist-check

all: build

## build: compile bin/penguin, stamped with the version from git, and
## bin/penguin-sandbox, the lean sandbox trampoline it uses from beside it.
## Both are static (no cgo) and built as `make images` builds the image's
## binary, so that one build's compiled packages serve the other.
BUILD := CGO_ENABLED=0 $(GO) build -trimpath
build:
	$(BUILD) -ldflags '$(LDFLAGS)' -o bin/penguin ./cmd/penguin
	$(BUILD) -o bin/penguin-sandbox ./cmd/penguin-sandbox

## cross: compile every package for another system on each architecture,
## then vet every package with its tests for darwin and windows (vet
## compiles the test binaries without linking them), so that a Linux-only
## call in shared code or in a test fails here rather than on a user's
## Mac. The end-to-end suites under e2e/ are left out of that vet: they
## run penguin in network namespaces, which are Linux's. `make dist` builds penguin
## itself for all six release targets (-trimpath, as dist builds, so that
## dist reuses these packages).
CROSS_TARGETS ?= linux/arm64 darwin/arm64 windows/amd64
CROSS_TEST_TARGETS ?= darwin/arm64 windows/amd64
cross:
	@set -e; for t in $(CROSS_TARGETS); do \
		echo "cross: $$t"; \
		CGO_ENABLED=0 GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) build -trimpath ./... ; \
	done; \
	for t in $(CROSS_TEST_TARGETS); do \
		echo "cross tests: $$t"; \
		export CGO_ENABLED=0 GOOS=$${t%/*} GOARCH=$${t#*/}; \
		$(GO) vet -trimpath $$($(GO) list ./... | grep -v '/e2e\(/\|$$\)'); \
	done

## dist: the release archives under bin/dist (deploy/dist): penguin for
## each target, stamped with VERSION, as .tar.gz (.zip for windows) with
## the README and the LICENSE, plus SHA256SUMS; reproducible. dist-check builds them twice,
## compares the bytes and runs the Linux archives' `penguin version`.
dist:
	$(GO) run ./deploy/dist -version $(VERSION) -out bin/dist
dist-check:
	VERSION=$(VERSION) deploy/dist/check.sh

## test: every test, with the race detector. This includes the gen/ drift
## check (internal/gencheck), which fails when gen/ is not what
## `make generate` writes. PKGS=./internal/... narrows it.
## Several test packages build penguin and the pinned tools as programs to
## run; those are compiled once first, or on a cold build cache each of
## those packages would compile all of it at the same time.
test:
	$(GO) build ./...
	$(GO) build -modfile=tools/go.mod tool
	$(GO) test -race -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) $(PKGS)

## lint: buf lint and format check on proto/, gofmt and go vet on Go code.
lint:
	$(TOOL) buf lint
	$(TOOL) buf format -d --exit-code
	@unformatted="$$(gofmt -l $(GO_FILES))"; \
	if [ -n "$$unformatted" ]; then \
		echo "gofmt would change these files:"; echo "$$unformatted"; exit 1; \
	fi
	$(GO) vet ./...

## generate: regenerate gen/ from proto/ with the pinned buf and plugins.
generate:
	$(TOOL) buf generate --clean

## bench: run the benchmarks (never part of `make test`), one package at a
## time (-p 1) so that no package's load skews another's figures.
bench:
	@if [ -z "$(strip $(BENCH_PKGS))" ]; then echo "no benchmarks yet"; exit 0; fi; \
	$(GO) test -p 1 -run '^$$' -bench . -benchmem -benchtime=$(BENCHTIME) -timeout $(TEST_TIMEOUT) $(BENCH_PKGS)

## images: build the container images offline (no registry, no daemon) and
## save them as archives under bin/images/ (deploy/images/build.sh): penguin
## (FROM scratch), penguin-environment and penguin-postgres (Debian root
## filesystems from debootstrap, cached in IMAGE_CACHE). Needs root.
IMAGE_CACHE ?= bin/images/cache
images:
	IMAGE_CACHE=$(IMAGE_CACHE) VERSION=$(VERSION) deploy/images/build.sh

## k8s-test: the Kubernetes suite (e2e/k8s/run.sh): a real single-node
## cluster built from the Go module proxy (binaries cached in
## K8S_BIN_CACHE_DIR), the dev overlay applied, scaling, rollouts and pod
## loss tested through the engine Service, then the cluster torn down.
## Needs root; never part of `make test`.
K8S_BIN_CACHE_DIR ?= /var/cache/penguin-ci
k8s-test:
	K8S_BIN_CACHE_DIR=$(K8S_BIN_CACHE_DIR) IMAGE_CACHE=$(K8S_BIN_CACHE_DIR)/images e2e/k8s/run.sh

## k8s-soak: the Kubernetes suite with each engine-loss scenario (a rollout
## restart, a forced pod delete, mid-task) run 20 times instead of 5; about
## an hour. Outside CI.
k8s-soak:
	PENGUIN_K8S_REPEAT=20 PENGUIN_K8S_TIMEOUT=120m $(MAKE) k8s-test

## run: build, then run all services in one process (gRPC on 127.0.0.1:7420,
## the web app and HTTP/SSE on http://127.0.0.1:7480/). With no model key
## (OPENAI_API_KEY, ANTHROPIC_API_KEY, …) the web app offers a form that adds
## a provider, which the running server picks up (see README.md).
run: build
	bin/penguin serve

## demo: an offline demo: the three services as separate processes plus a
## scripted model (`penguin mockllm`) fixing a bug in a temporary workspace.
## The model is scripted; the services, the edits and the test run are real.
demo: build
	PENGUIN=bin/penguin examples/demo/demo.sh

## web: rebuild the web app into web/dist (committed and embedded in the
## binary, so `make build` needs no Node) with the npm toolchain pinned in
## web/package-lock.json.
web:
	cd web && npm ci --no-audit --no-fund && npm run build

## web-check: the web app's unit tests and type check, and the drift check
## that fails when web/dist is not what the sources build to.
web-check:
	cd web && npm ci --no-audit --no-fund && npm test && npm run check
	rm -rf web/.dist-check
	cd web && npx vite build --outDir .dist-check --emptyOutDir --logLevel warn
	diff -r web/dist web/.dist-check || { echo "web/dist is stale: run make web and commit it"; exit 1; }
	rm -rf web/.dist-check

## web-e2e: the web app in a real browser (Debian's chromium driven by
## playwright-core) against a real `penguin serve` and `penguin mockllm`
## (and, for the sign-in through an identity provider, the test provider
## bin/oidcop);
## screenshots of each screen go to web/artifacts/.
web-e2e: build
	$(GO) build -o bin/oidcop ./internal/testkit/oidcop/cmd/oidcop
	cd web && PENGUIN=$(CURDIR)/bin/penguin OIDCOP=$(CURDIR)/bin/oidcop npm run e2e
