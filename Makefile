# Oxiflow: one entry point for people and CI (.ci/run calls `make test`).
# Every target installs or builds what it needs, so any of them works first on a fresh
# Debian bookworm machine with Rust and python3 (as root, or with sudo for `setup`).
#
#   make setup    install Julia 1.5.3 (Debian bullseye package) when `julia` is missing,
#                 chromium + graphviz (profile checks) when missing, NVRTC (pip wheel
#                 nvidia-cuda-nvrtc 13.0.88, unpacked into .deps/nvrtc) for the kernel compile
#                 check, OpenBLAS (pip wheel scipy-openblas32, unpacked into .deps/openblas) for
#                 MatMul, SciPy (a virtual environment in .deps/scipy) for the Julia tests of
#                 save/load against scipy.io, and an empty local Julia registry in the depot
#                 when it has none
#   make build    the release cdylib target/release/liboxiflow.so that Julia loads
#   make header   regenerate crates/oxiflow-capi/include/oxiflow.h with cbindgen
#   make test     `make lint`, Rust tests (with the NVRTC compile check of every kernel in kernels/), Julia package tests (Pkg.test, offline, fresh depot), the HTML timeline in headless Chromium,
#                 the example programs (test/examples/), then every seed script in test/seeds/
#   make lint     cargo fmt --check (rustfmt.toml), clippy with warnings as errors (clippy.toml), and
#                 one feature set for the library and the tests (scripts/check-feature-unification.sh)
#   make test-adding-an-op  follow docs/adding-an-op.md's example (a new op, Log1p) in a scratch
#                 copy and check that it builds, passes its tests and runs from Julia (in make test)
#   make demo     examples/placement_tour.jl then examples/digits_mlp.jl, run in out/ (where
#                 their profiles land)
#   make test-kernels-emulated  run kernels/*.cu on the CPU under a host emulation of CUDA (g++)
#   make fuzz     the property tests of every C export and of the device-string parser with
#                 FUZZ_CASES cases each (default 1,000,000; `make test` runs 100,000), and
#                 every op with hostile operands, OP_FUZZ_CASES cases each (5,000; 400)
#   make bench    criterion benchmarks of oxiflow-core (figures: docs/performance/engine.md)
#   make bench-gpu  on a machine with a GPU and Rust: crates/oxiflow-cuda/examples/gpu_bench.rs
#                 and scripts/torch_bench.py (without Rust there: scripts/gpu-check.sh)
#   make bench-replicas  examples/data_parallel.jl: digits with 1/2/4 replicas, sync and async
#   make bench-peers  the same workloads in Oxiflow (from Julia) and in TF1, PyTorch, JAX and
#                 NumPy (installed into .deps/peers by scripts/install-peers.sh); a ratio table
#                 in out/bench-peers.md (bench/peers/, docs/performance.md)
#   make bench-peers-rounds  its MLP step and MatMul in ROUNDS (5) alternating rounds, each
#                 round's ratio and their median (out/bench-peers-rounds.md)
#   make clean    remove build outputs and out/ (distclean: also .deps/)

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
# Steps must run in order (tests need the library, Julia needs `setup`), even under -j.
.NOTPARALLEL:
.DEFAULT_GOAL := build

CARGO ?= cargo
JULIA ?= julia
PYTHON ?= python3

LIB := $(CURDIR)/target/release/liboxiflow.so
JULIA_PROJECT := $(CURDIR)/julia/Oxiflow
# Julia always loads the library just built here, whatever the caller's environment says.
JULIA_RUN := OXIFLOW_LIB=$(LIB) $(JULIA) --project=$(JULIA_PROJECT)

CBINDGEN := $(CURDIR)/.deps/cargo/bin/cbindgen
HEADER := crates/oxiflow-capi/include/oxiflow.h

# NVRTC for the kernels' compile check (scripts/install-nvrtc.sh puts it here).
NVRTC_LIBDIR := $(CURDIR)/.deps/nvrtc/nvidia/cu13/lib

# Seed programs: every script in test/seeds/ except common.jl, the helpers they include.
SEED_HELPERS := test/seeds/common.jl
SEEDS := $(sort $(filter-out $(SEED_HELPERS),$(wildcard test/seeds/*.jl)))

.PHONY: bench-mpi test-mpi test-adding-an-op fuzz bench-gpu all setup nvrtc test-kernels-emulated build header lint test test-rust test-julia test-html test-examples test-seeds demo bench bench-sparse bench-replicas bench-peers bench-peers-rounds bench-quick clean distclean

all: build

setup: nvrtc
	bash scripts/install-julia.sh
	bash scripts/install-tools.sh
	bash scripts/install-openblas.sh
	PYTHON=$(PYTHON) bash scripts/install-scipy.sh
	$(JULIA) --startup-file=no scripts/julia-local-registry.jl

nvrtc:
	bash scripts/install-nvrtc.sh

# The MPI collectives (crates/oxiflow-mpi on rsmpi) where OpenMPI's mpicc exists (make setup
# installs it); without it the library builds without MPI and mpi_init says so. `=`, not
# `:=`: decided when the recipe runs, after setup.
MPI_FEATURE = $(if $(shell command -v mpicc 2>/dev/null),--features mpi,)
MPIRUN = mpirun --oversubscribe $(if $(filter 0,$(shell id -u)),--allow-run-as-root,)

build:
	$(CARGO) build --release -p oxiflow-capi $(MPI_FEATURE)

header: $(CBINDGEN)
	$(CBINDGEN) --config crates/oxiflow-capi/cbindgen.toml --crate oxiflow-capi \
		--output $(HEADER) crates/oxiflow-capi

$(CBINDGEN):
	$(CARGO) install cbindgen --locked --root .deps/cargo

test: setup build lint test-rust test-julia test-mpi test-html test-examples test-adding-an-op test-seeds

# The MPI collectives, point-to-point ops, Horovod-style training and asynchronous training
# with a parameter server on 2 and 4 local ranks
# (loopback), the 2-D heat example on a 2x2 rank grid and the digits job on 4 ranks, then
# jobs whose ranks diverge, which must end with a clear error, not hang
# (scripts/check-mpi-failures.sh).
test-mpi: setup build
	@command -v mpirun >/dev/null 2>&1 && command -v mpicc >/dev/null 2>&1 || { echo "make test-mpi: cannot run here: OpenMPI is missing (make setup installs openmpi-bin and libopenmpi-dev)"; exit 1; }
	@# precompile once: ranks loading a stale package at the same time race on its cache file
	$(JULIA_RUN) --startup-file=no -e 'using Oxiflow'
	for np in 2 4; do for t in collectives p2p distributed async_ps; do \
		echo "--- test/mpi/$$t.jl on $$np ranks"; \
		OXIFLOW_MPI_TIMEOUT=120 OXIFLOW_LIB=$(LIB) timeout 900 $(MPIRUN) -np $$np \
			$(JULIA) --startup-file=no --project=$(JULIA_PROJECT) julia/Oxiflow/test/mpi/$$t.jl || exit 1; \
	done; done
	@echo "--- examples/mpi_heat.jl on 4 ranks (2x2 grid, halo exchange against the single-process solve)"
	OXIFLOW_MPI_TIMEOUT=120 OXIFLOW_LIB=$(LIB) timeout 900 $(MPIRUN) -np 4 \
		$(JULIA) --startup-file=no --project=$(JULIA_PROJECT) examples/mpi_heat.jl
	@echo "--- examples/mpi_digits.jl on 4 ranks (fails below 95 % held-out accuracy on any rank)"
	OXIFLOW_MPI_TIMEOUT=120 OXIFLOW_LIB=$(LIB) timeout 900 $(MPIRUN) -np 4 \
		$(JULIA) --startup-file=no --project=$(JULIA_PROJECT) examples/mpi_digits.jl
	MPIRUN="$(MPIRUN)" OXIFLOW_LIB=$(LIB) JULIA=$(JULIA) bash scripts/check-mpi-failures.sh

# docs/adding-an-op.md's example, applied to a scratch copy of the tree exactly as the doc
# marks its code blocks, then built and tested there (scripts/check-adding-an-op.py).
test-adding-an-op: setup nvrtc
	JULIA=$(JULIA) $(PYTHON) scripts/check-adding-an-op.py

# Layout and lints, as part of every test run: rustfmt.toml's layout, and clippy with every
# warning an error (clippy.toml holds the project's two settings). Both come with rustup's
# default profile; a toolchain without them fails here, naming the missing component.
lint:
	@$(CARGO) fmt --version >/dev/null 2>&1 || { echo "make lint: rustfmt is missing (rustup component add rustfmt)"; exit 1; }
	@$(CARGO) clippy --version >/dev/null 2>&1 || { echo "make lint: clippy is missing (rustup component add clippy)"; exit 1; }
	$(CARGO) fmt --all --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings
	$(if $(MPI_FEATURE),$(CARGO) clippy --release -p oxiflow-capi $(MPI_FEATURE) -- -D warnings,@echo "make lint: no OpenMPI here, the MPI transport is not linted")
	bash scripts/check-feature-unification.sh

# --release: the tests share the build of the cdylib's dependencies and run fast.
# --all-targets: benches are built and each runs once (criterion test mode), so an API
# change that breaks a bench fails CI. NVRTC on LD_LIBRARY_PATH: oxiflow-cuda's
# tests/kernels_compile.rs compiles every kernel file (OXIFLOW_REQUIRE_NVRTC=1: it fails
# without NVRTC instead of skipping). GPU tests skip here, naming why (no driver or GPU).
# oxiflow-cuda's tests run with --nocapture so that each GPU test that cannot run here says
# `skipped: no CUDA ...` in the log (the other crates' passing tests print nothing: their
# property tests provoke 100,000 caught panics). The two invocations share one build of the
# dependencies and of oxiflow-core: `make lint`'s feature-unification check keeps their
# feature sets equal.
test-rust: nvrtc
	$(CARGO) test --workspace --exclude oxiflow-cuda --release --all-targets
	OXIFLOW_REQUIRE_NVRTC=1 LD_LIBRARY_PATH=$(NVRTC_LIBDIR)$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH} $(CARGO) test -p oxiflow-cuda --release --all-targets -- --nocapture

# Property tests with hostile arguments (crates/oxiflow-capi/tests/abi_props_*.rs,
# crates/oxiflow-core/tests/device_names.rs) and every op run with hostile operands
# (crates/oxiflow-core/tests/op_fuzz.rs, OP_FUZZ_CASES cases per op and per template),
# many more cases than `make test` runs. `make test` runs them with a fixed seed;
# `make fuzz` draws a new one each time and prints it (replay a run: make fuzz FUZZ_SEED=<n>).
FUZZ_CASES ?= 1000000
OP_FUZZ_CASES ?= 5000
FUZZ_TESTS := -p oxiflow-capi --test abi_props_config --test abi_props_graph --test abi_props_session -p oxiflow-core --test device_names --test op_fuzz
fuzz:
	@mkdir -p out; start=$$(date +%s); seed=$${FUZZ_SEED:-$$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}; set +e; \
	OXIFLOW_FUZZ_CASES=$(FUZZ_CASES) OXIFLOW_OP_FUZZ_CASES=$(OP_FUZZ_CASES) OXIFLOW_FUZZ_SEED=$$seed $(CARGO) test --release $(FUZZ_TESTS) > out/fuzz.log 2>&1; rc=$$?; set -e; \
	grep -E '^test |test result|minimal failing input|memory allocation|signal:|for over a minute' out/fuzz.log || true; \
	n=$$(grep -c ' \.\.\. ok$$' out/fuzz.log || true); f=$$(grep -c ' \.\.\. FAILED$$' out/fuzz.log || true); \
	echo "fuzz: $$n tests passed, $$f failed, $(FUZZ_CASES) cases per property, $(OP_FUZZ_CASES) per op, seed $$seed, $$(( $$(date +%s) - start )) s; log: out/fuzz.log"; \
	exit $$rc

# The kernels' logic on the CPU (no GPU, no NVRTC): scripts/emulate-kernels.sh.
test-kernels-emulated:
	bash scripts/emulate-kernels.sh

# The Julia tests through Julia's package workflow, as a user runs it: a fresh depot with
# no registry reachable (JULIA_PKG_OFFLINE, the empty local registry of make setup),
# Pkg.develop, Pkg.build (deps/build.jl: cargo, then the library's path in deps/deps.jl,
# so OXIFLOW_LIB is unset here on purpose), `using Oxiflow` and Pkg.test from a directory
# outside the repository. The save/load tests (test/matfile.jl) check files against SciPy
# with the python of make setup's .deps/scipy (OXIFLOW_SCIPY_PYTHON).
test-julia: setup build
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	export JULIA_DEPOT_PATH="$$tmp/depot" JULIA_PKG_OFFLINE=true OXIFLOW_SCIPY_PYTHON=$(CURDIR)/.deps/scipy/bin/python; unset OXIFLOW_LIB; \
	$(JULIA) --startup-file=no scripts/julia-local-registry.jl; \
	cd "$$tmp" && $(JULIA) --startup-file=no -e 'using Pkg; Pkg.develop(path="$(JULIA_PROJECT)"); Pkg.build("Oxiflow"); \
		using Oxiflow; println("Oxiflow loads ", Oxiflow.libpath()); Pkg.test("Oxiflow")'

# The HTML timeline loaded in headless Chromium; page, DOM dump and screenshot in out/test-html/.
test-html: setup build
	$(JULIA_RUN) test/html/timeline_chromium.jl $(CURDIR)/out/test-html

# Example programs with their results asserted (test/examples/*.jl), each in a scratch dir,
# two at a time (scripts/run-julia-scripts.sh).
test-examples: setup build
	@JULIA_RUN="$(JULIA_RUN)" bash scripts/run-julia-scripts.sh examples $(sort $(wildcard test/examples/*.jl))
	@echo "=== crates/oxiflow-cuda/examples/digits_gpu.rs (the main job without Julia, as the GPU machines run it)"
	@$(CARGO) build -q --release -p oxiflow-cuda --example digits_gpu
	@tmp=$$(mktemp -d); gunzip -c data/digits.csv.gz > "$$tmp/digits.csv"; \
	./target/release/examples/digits_gpu "$$tmp/digits.csv" | tail -1; rc=$${PIPESTATUS[0]}; \
	rm -rf "$$tmp"; exit $$rc

# Each seed in its own scratch directory, two at a time; all run even if one fails, then a
# summary line (scripts/run-julia-scripts.sh).
test-seeds: setup build
	@if [ -z "$(SEEDS)" ]; then echo "seeds: no seed scripts found in test/seeds/"; exit 1; fi
	@JULIA_RUN="$(JULIA_RUN)" bash scripts/run-julia-scripts.sh seeds $(SEEDS)

demo: setup build
	mkdir -p out
	cd out && $(JULIA_RUN) $(CURDIR)/examples/placement_tour.jl
	cd out && $(JULIA_RUN) $(CURDIR)/examples/digits_mlp.jl

# Data-parallel digits training, 1/2/4 replicas, sync and async (figures: docs/performance/parallel.md)
bench-replicas: setup build
	mkdir -p out
	cd out && $(JULIA_RUN) $(CURDIR)/examples/data_parallel.jl 8

bench:
	$(CARGO) bench -p oxiflow-core

# Sparse solves (LU, Cholesky) and assembly against Julia's SparseArrays (UMFPACK, CHOLMOD)
# in one run: docs/performance/sparse.md, "Sparse matrices".
# Oxiflow's mpi_allreduce of 100 MB against a bare MPI_Allreduce, 2 ranks (bench/mpi_allreduce.jl)
bench-mpi: setup build
	$(CARGO) build --release -p oxiflow-mpi --features mpi --example allreduce_bench
	$(JULIA_RUN) --startup-file=no -e 'using Oxiflow'
	for np in 2; do \
		$(MPIRUN) -np $$np target/release/examples/allreduce_bench; \
		OXIFLOW_LIB=$(LIB) $(MPIRUN) -np $$np $(JULIA) --startup-file=no --project=$(JULIA_PROJECT) bench/mpi_allreduce.jl; \
	done

bench-sparse: setup build
	$(JULIA_RUN) bench/sparse.jl

# Oxiflow against TF1 (graph + Session), PyTorch (eager), JAX (jit) and NumPy on the same
# workloads, one run on this machine: bench/peers/. A peer that did not install is shown
# as "not installed". Raw JSON lines: out/bench-peers.jsonl; table: out/bench-peers.md.
PEERS_PY := $(CURDIR)/.deps/peers/bin/python
bench-peers: setup build
	bash scripts/install-peers.sh
	mkdir -p out
	py=$(PEERS_PY); [ -x "$$py" ] || py=$(PYTHON); \
	"$$py" bench/peers/peers.py > out/bench-peers-peers.jsonl
	$(JULIA_RUN) bench/peers/oxiflow.jl > out/bench-peers-oxiflow.jsonl
	$(PYTHON) bench/peers/table.py out/bench-peers-peers.jsonl out/bench-peers-oxiflow.jsonl

# The MLP step and MatMul of bench-peers in alternating rounds (ROUNDS=5 by default), each
# round's ratio and their median: out/bench-peers-rounds.md (bench/peers/rounds.py).
bench-peers-rounds: setup build
	bash scripts/install-peers.sh
	mkdir -p out
	py=$(PEERS_PY); [ -x "$$py" ] || py=$(PYTHON); \
	$(PYTHON) bench/peers/rounds.py --peers-python "$$py" --julia "$(JULIA_RUN)" --rounds $(or $(ROUNDS),5)

# GPU figures (docs/performance/gpu.md, "GPU"): says so and measures nothing without a GPU.
bench-gpu: nvrtc
	$(CARGO) build --release -p oxiflow-cuda --example gpu_bench
	LD_LIBRARY_PATH=$(NVRTC_LIBDIR)$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH} ./target/release/examples/gpu_bench
	-$(PYTHON) scripts/torch_bench.py

# One quick pass (criterion --quick); `--bench '*'` keeps the flag away from libtest.
bench-quick:
	$(CARGO) bench -p oxiflow-core --bench '*' -- --quick

clean:
	$(CARGO) clean
	rm -rf out

distclean: clean
	rm -rf .deps
