# gpuquota — convenience wrapper around CMake.
#   make demo   install dependencies, build, run the demo
#   make test   install dependencies, build with -Werror + ASan/UBSan, build the
#               Kubernetes control plane (cached), run every test, e2e included
#   make demo-cluster   the demo on a real control plane
#   make soak   the preemption churn (e2e_preempt_churn) for 10 minutes instead of 2
#   make install        gpuquota and kubectl-gpuquota into $(PREFIX)/bin (optimised build)
#   make release        the release artifacts into $(RELEASE_DIR) (docs/install.md#releases)
BUILD      ?= build
BENCH_DIR  ?= build-bench
FUZZ_DIR   ?= build-fuzz
RELEASE_DIR ?= build-release
RELEASE_WORK ?= build-release-work
PREFIX     ?= /usr/local
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
SAN_ENV     = ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
              UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

.PHONY: all deps build k8s-bin test soak demo demo-cluster bench fuzz fuzz-smoke image format clean install release

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DGQ_WERROR=ON -DGQ_SANITIZE=ON

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory

# kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kubectl and
# kwok, built from their Go modules into a cache (scripts/k8s-bin.sh).
k8s-bin:
	@scripts/k8s-bin.sh

# A tree configured without the e2e suite would drop it without a word.
test: build k8s-bin fuzz-smoke
	@grep -q '^GQ_E2E:BOOL=ON' $(BUILD)/CMakeCache.txt || { echo "make test: $(BUILD) is configured with GQ_E2E=OFF, which leaves out the e2e and Helm tests; remove $(BUILD) (or use another BUILD=) and run make test again" >&2; exit 1; }
	cd $(BUILD) && $(SAN_ENV) ctest --output-on-failure -j $(JOBS)

# e2e_preempt_churn for GQ_E2E_CHURN_SECONDS (600 unless set) on its own
# control plane: the ten-minute churn docs/queueing.md reports.
soak: build k8s-bin
	cd $(BUILD) && GQ_E2E_CHURN_SECONDS=$${GQ_E2E_CHURN_SECONDS:-600} $(SAN_ENV) \
	    ctest --output-on-failure -R '^e2e_(up|preempt_churn|down)$$'

demo: build
	@$(SAN_ENV) scripts/demo.sh $(BUILD)

demo-cluster: build k8s-bin
	@$(SAN_ENV) scripts/demo-real-cluster.sh $(BUILD)

bench: deps
	cmake -S . -B $(BENCH_DIR) -DCMAKE_BUILD_TYPE=Release -DGQ_BENCH=ON
	cmake --build $(BENCH_DIR) -j $(JOBS)
	scripts/bench.sh $(BENCH_DIR)
	@echo; echo "== /validate with charging against the stand-in (3 webhook processes over HTTPS)"
	$(BENCH_DIR)/test/bench_validate --standin $(BENCH_DIR)/test/kube-standin --gpuquota $(BENCH_DIR)/gpuquota
	@echo; echo "== controller: initial sync of 100k GPU pods in 1k namespaces, event-to-status latency"
	$(BENCH_DIR)/bench/bench_controller $(BENCH_DIR)/test/kube-standin $(BENCH_DIR)/gpuquota deploy/crds
	@echo; echo "== kube client: paged list of 100k pods, watch throughput"
	$(BENCH_DIR)/test/bench_kube_list --standin $(BENCH_DIR)/test/kube-standin
	@echo; echo "== queue: the admission pass's decisions, 10,000 queued and 10,000 admitted pods, one preemption"
	$(BENCH_DIR)/test/bench_preempt_micro
	scripts/bench-pods.sh $(BENCH_DIR)
	@echo; echo "== GPU pod creates at fixed rates, open loop"
	scripts/bench-open.sh $(BENCH_DIR)
	@echo; echo "== queue against Kueue: create to ungate, 10,000 queued pods drained (GQ_BENCH_KUEUE=0 skips it)"
	@if [ "$${GQ_BENCH_KUEUE:-1}" != 0 ]; then scripts/bench-kueue.sh $(BENCH_DIR); fi

# An optimised build without sanitizers; kubectl finds the plugin through the
# kubectl-gpuquota symlink installed beside gpuquota (docs/kubectl-plugin.md).
# It is the tree, and the binary, of the release's linux/amd64 archive.
install: deps
	cmake -S . -B $(RELEASE_WORK)/linux-amd64 -DCMAKE_BUILD_TYPE=Release -DGQ_BENCH=OFF -DGQ_E2E=OFF \
	      -DCMAKE_C_FLAGS="-ffile-prefix-map=$(CURDIR)=."
	cmake --build $(RELEASE_WORK)/linux-amd64 -j $(JOBS) --target gpuquota
	cmake --install $(RELEASE_WORK)/linux-amd64 --prefix $(PREFIX)

# The binary archives (linux/amd64; linux/arm64 with Debian's cross toolchain,
# which ARM64=1 installs), the image archive, the Helm chart, the krew manifest
# with their sha256 and SHA256SUMS, into RELEASE_DIR (scripts/release.sh).
# ARM64=0 leaves arm64 out; GQ_RELEASE_IMAGE=0 the image.
release: deps
	@ARM64=$(ARM64) GQ_RELEASE_WORK=$(abspath $(RELEASE_WORK)) scripts/release.sh $(RELEASE_DIR)

fuzz: deps
	CC=clang cmake -S . -B $(FUZZ_DIR) -DGQ_FUZZ=ON -DGQ_SANITIZE=ON
	cmake --build $(FUZZ_DIR) -j $(JOBS)

# gpuquota's container image as an OCI archive, from Debian's packages alone.
IMAGE ?= $(BUILD)/gpuquota-image.tar
image: deps
	@scripts/build-image.sh $(IMAGE)

# Every libFuzzer target for FUZZ_SECONDS from its seed corpus (part of make test).
FUZZ_SECONDS ?= 5
fuzz-smoke: deps
	@scripts/fuzz-smoke.sh $(FUZZ_DIR) $(FUZZ_SECONDS)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(BENCH_DIR) $(FUZZ_DIR) $(RELEASE_DIR) $(RELEASE_WORK) build-image
