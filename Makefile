# Front door over CMake. `make` builds into build/; `make demo` and `make check` first make
# sure the Debian packages they need are present (scripts/deps.sh).
BUILD ?= build
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PREFIX ?= /usr/local

.PHONY: all deps test-deps configure demo check install clean asan fuzz interop

all: configure
	cmake --build $(BUILD) -j $(JOBS)

deps:
	@scripts/deps.sh

# The build dependencies and the packages the tests run (the rdma-core programs the
# drop-ins are tested with, tshark for the captures, iproute2 for the namespaces).
test-deps:
	@scripts/deps.sh --test

# Configured again on every run, not only the first: what the tree builds depends on what
# is installed (the drop-ins need the rdma-core headers that `make check` installs after
# `make demo` configured the tree), and CMake searches again for what it did not find
# before. On an unchanged machine this is a second's no-op.
configure:
	@if test -f $(BUILD)/CMakeCache.txt; then cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null; \
	else cmake -S . -B $(BUILD) $(CMAKE_FLAGS); fi

demo: deps all
	@scripts/demo.sh $(BUILD)

# The suite, then the groups that skipped and why (scripts/check.sh).
check: test-deps all
	@scripts/check.sh $(BUILD)

# The same suite under AddressSanitizer + UBSan, in its own build tree.
asan:
	$(MAKE) check BUILD=build-asan CMAKE_FLAGS="-DSV_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug"

# libFuzzer binaries (clang), in their own build tree.
fuzz: deps
	@test -f build-fuzz/CMakeCache.txt || CC=clang cmake -S . -B build-fuzz -DSV_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug
	cmake --build build-fuzz -j $(JOBS)

# softverbs' UDP transport against the Linux kernel's Soft-RoCE (rxe) in a qemu guest, both
# directions, IPv4 and IPv6 (test/interop/README.md). As root it installs what it needs;
# otherwise it names what is missing and skips.
INTEROP_JOBS ?= 2
interop: deps all
	@test/interop/run.sh --build $(BUILD) --jobs $(INTEROP_JOBS)

# The prefix is configured, not only passed at install time: softverbs.pc, the CMake
# package files and svrun record where things live.
install: configure
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	cmake --install $(BUILD)

clean:
	rm -rf build build-asan build-fuzz build-interop
