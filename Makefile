# Top-level driver. `make` builds build/winml; `make test` installs what is
# missing (Debian packages when root, a Python venv for the oracle tests),
# builds the normal and the ASan+UBSan trees and runs every test;
# `make demo` runs the main job on a default model.
JOBS ?= $(shell nproc)
# pytest-xdist workers of the oracle suite (whole modules per worker: --dist loadfile keeps module fixtures
# built once); at most 4, so that a big machine does not hold dozens of torch processes
ORACLE_JOBS ?= $(shell n=$$(nproc); [ $$n -gt 4 ] && n=4; echo $$n)
BUILD ?= build
VENV ?= .venv

.PHONY: all deps venv test unit unit-asan oracle fuzz-smoke fuzz conformance demo clean

all: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

deps:
	@scripts/setup-deps.sh

venv:
	@scripts/setup-venv.sh $(VENV)

unit: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

unit-asan: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DWM_SANITIZE=ON -DWM_FUZZ=ON >/dev/null
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS)

fuzz-smoke: unit-asan
	scripts/fuzz.sh smoke

fuzz: unit-asan
	scripts/fuzz.sh long

oracle: all venv unit-asan
	WM_BUILD=$(BUILD) WM_BUILD_ASAN=build-asan $(VENV)/bin/python -m pytest -q -n $(ORACLE_JOBS) --dist loadfile --durations=40 -o tmp_path_retention_policy=failed -o tmp_path_retention_count=1 tests/oracle

conformance: all venv
	WM_BUILD=$(BUILD) VENV=$(VENV) scripts/conformance.sh

test: unit unit-asan fuzz-smoke conformance oracle

demo: all
	scripts/demo.sh

clean:
	rm -rf $(BUILD) build-asan
