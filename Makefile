# The front door. `make` builds, `make demo` runs the main job on the bundled dataset,
# `make test` runs the whole suite. Each first installs missing Debian packages.
BUILD     ?= build
JOBS      ?= 2
HALO_CUDA ?= AUTO
# CI (CI=true) turns warnings into errors.
WERROR    ?= $(if $(filter true 1,$(CI)),ON,OFF)
HALO      := $(BUILD)/bin/halo

.PHONY: all deps configure build demo test clean

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

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD)
