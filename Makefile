# ibcm: `make` runs the main job, `make test` runs everything CI runs.
GO      ?= go
GOFLAGS ?=
export GOFLAGS

.PHONY: all deps generate check-generate build vet staticcheck model model-test model-full model-cluster mutants mutants-shell sim test unit interop interop-bench bench fuzz-short pbt-long conformance rdmacm clean

all: deps check-generate build rdmacm model sim

deps:
	tools/deps.sh

generate:
	$(GO) generate ./...

# The generated files in git must be exactly what the generator emits now.
check-generate:
	tools/check-generate.sh

build:
	$(GO) build ./...

# librdmacm.so.1 over ibcmd, in rdmacm/build (docs/rdmacm.md), and its
# tests: the ABI against rdma-core's and the Debian programs', and the
# library against a fake daemon.
rdmacm:
	$(MAKE) -C rdmacm
	$(GO) test -count=1 ./rdmacm/

vet:
	$(GO) vet ./...
	$(GO) vet -tags interop ./tools/interop/...

# staticcheck at the version go.mod's tool directive pins: without build
# tags, as a reader builds the tree, and with the interop tag, so that it
# reads the harness's checks too.
staticcheck:
	$(GO) tool staticcheck ./...
	$(GO) tool staticcheck -tags interop ./...

# Model-check spec/cm.cfg (the main configuration).
model:
	tools/model.sh spec/cm.cfg

# Every config in spec/manifest.tsv: expected outcome and state count; the
# sequence chart of cm_legacy.cfg's counterexample (docs/cm-legacy.svg).
model-test:
	tools/model.sh --manifest spec/manifest.tsv

# The manifest's "full" rows: complete searches too long for make test
# (spec/cm_full.cfg, cm.cfg explored to its end, and the slower IndInv
# checks; docs/model.md gives their times).
model-full:
	tools/model.sh --full spec/manifest.tsv

# spec/cm_cluster.cfg, all of it, with TLC's distributed mode (one local
# worker; more, on other hosts too: docs/model.md).
model-cluster:
	tools/model-cluster.sh cm_cluster.cfg $(or $(WORKERS),1)

# Mutants of gen/def and the engine, each caught by TLC or the gopter
# suite, and by the checks at every depth (docs/mutants.md; hours on 2 cores,
# not part of make test).
mutants:
	$(GO) run ./tools/mutants

# Mutants of the shell (cm/*.go: the Manager; not the engine, nor cm's
# other packages, nor the daemon's client, Dial's files), from gremlins at
# the version go.mod's tool directive pins: each mutant alone against cm's
# tests, two at a time (docs/mutants.md gives the runs' figures; about 50
# minutes on 2 cores at a load average near 5, two hours at 15; not part
# of make test). The tests run with -short (a quarter of the API property
# test's sequences, so the figure is a lower bound for the full suite),
# without the scheduler's order tests of sched_test.go, which fail under
# the load of the run and the coverage build, and without
# TestThroughTheDaemon, which runs the examples and the property test
# again through a daemon (the client's files are not mutated); a mutant
# is given three times the coverage run's time.
MUTANTS_SHELL_SKIP = ^(TestBurstsDoNotHoldBackAnswers|TestSlowBurstDoesNotHoldBackAnswers|TestCallsDoNotHoldBackAnswers|TestThroughTheDaemon)$$
MUTANTS_SHELL_CLIENT = ^(dial|hoststatus|remote[a-z_]*)\.go$$
mutants-shell:
	mkdir -p .work
	GOFLAGS="$(GOFLAGS) -short -skip=$(MUTANTS_SHELL_SKIP)" $(GO) tool gremlins unleash \
		--workers 2 --timeout-coefficient 3 --integration=false \
		--exclude-files '/' --exclude-files '$(MUTANTS_SHELL_CLIENT)' \
		--output $(CURDIR)/.work/mutants-shell.json $(CURDIR)/cm

# The seed's workload: QPs opened and closed fast, each QPN reused right after
# DREQ/DREP. The spec-correct engine, then the pre-fix Linux behaviour.
sim: build
	$(GO) run ./cmd/ibcm sim --conns 2000 --seed 1
	$(GO) run ./cmd/ibcm sim --conns 2000 --seed 1 --legacy-timewait-qpn

# Every Go test, under the race detector; then the tests it cannot judge,
# built without it only: the scheduler's order (which it shuffles), the
# hostile-peer property (a lying peer's RDMA WRITE races reads by design).
unit:
	$(GO) test -race -count=1 -timeout 30m ./...
	$(GO) test -count=1 -run '^(TestBurstsDoNotHoldBackAnswers|TestSlowBurstDoesNotHoldBackAnswers|TestCallsDoNotHoldBackAnswers)$$' ./cm/
	$(GO) test -count=1 -run '^TestHostilePeerProperty$$' ./rdmapeer/

# ibcm against the Linux kernel CM in two QEMU VMs (tools/interop/README.md):
# each check a subtest of TestInterop.
interop:
	$(GO) test -tags interop -count=1 -timeout 20m -v -run '^TestInterop$$' ./tools/interop/

# ibcm against the kernel CM with rdma-core's cmtime in the two VMs: writes
# docs/interop-bench.md (about 15 minutes; not part of make test).
interop-bench:
	$(GO) run ./tools/interop/bench

bench:
	tools/bench.sh

fuzz-short:
	tools/fuzz.sh 20s

pbt-long:
	tools/pbt-long.sh

conformance:
	tools/conformance.sh

test: deps check-generate vet staticcheck unit model-test conformance fuzz-short interop
	@echo "make test: all checks passed"

clean:
	rm -rf .work
