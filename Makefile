# The front door. `make` builds, `make demo` runs the main job on the bundled dataset,
# `make test` runs the whole suite. Each first installs missing Debian packages.
BUILD     ?= build
JOBS      ?= 2
HALO_CUDA ?= AUTO
# CI (CI=true) turns warnings into errors.
WERROR    ?= $(if $(filter true 1,$(CI)),ON,OFF)
HALO      := $(BUILD)/bin/halo

FUZZ_SECONDS ?= 60
# `make lint LINT_ARGS=--changed`: only the sources changed since the merge base (CI).
LINT_ARGS ?=

.PHONY: all deps configure build demo test sanitize fuzz format format-check lint clean

all: build

deps:
	@bash tools/install-deps.sh

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DHALO_CUDA=$(HALO_CUDA) -DHALO_WERROR=$(WERROR)

configure: deps $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	@bash tools/demo.sh $(HALO)

# KaMinPar's Python package, NumPy 2 and pytest go in $(BUILD)/py when PyPI is reachable
# (HALO_PYTHON for --method kaminpar; ctest python.numpy2.*): their tests skip otherwise.
test: build
	@bash tools/install-kaminpar.sh $(BUILD)/py
	cd $(BUILD) && if [ -x py/bin/python ]; then export HALO_PYTHON=$$PWD/py/bin/python; fi && \
	  ctest --output-on-failure -j $(JOBS)

# The single-process tests under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/).
sanitize: deps
	bash tools/sanitize.sh

# Every reader's libFuzzer target for FUZZ_SECONDS each (clang, build-fuzz/; findings fail it).
fuzz:
	@bash tools/install-deps.sh --fuzz
	bash tools/fuzz.sh $(FUZZ_SECONDS)

# clang-format-14 over every tracked *.h *.cc *.cu: in place, or only checked (CI).
format:
	@bash tools/install-deps.sh --lint
	bash tools/format.sh

format-check:
	@bash tools/install-deps.sh --lint
	bash tools/format.sh --check
	bash tools/size-check.sh

# clang-tidy-14 (.clang-tidy) over the C++ sources of the configured build.
lint: configure
	@bash tools/install-deps.sh --lint
	bash tools/lint.sh $(LINT_ARGS) $(BUILD)

clean:
	rm -rf $(BUILD) build-asan build-fuzz
