# A thin wrapper over the README's commands. Each target installs what it
# needs (scripts/deps does nothing when everything is present).
#   make up      build and run a one-machine cluster (FAKE_GPUS=8xH100 to pretend)
#   make check   build normal and sanitizer variants and run every test
#   make bench   run the benchmarks under bench/
#   make install PREFIX=/usr/local   tenk, tenk-daemon and tenk-shim into PREFIX/bin,
#                                    bash completion into PREFIX/share/bash-completion

FAKE_GPUS ?=
LISTEN ?= 127.0.0.1:7480
UP_ARGS = --data ./tenk-data --listen $(LISTEN) $(if $(FAKE_GPUS),--fake-gpus $(FAKE_GPUS))

FUZZ_SECONDS ?= 60

PREFIX ?= /usr/local

.PHONY: all deps build build-asan build-fuzz up check bench fuzz install clean

all: build

deps:
	@scripts/deps

build: deps
	@test -f build/build.ninja || meson setup build
	@ninja -C build

# the sanitizers over the code as it ships (-O2, as build/): ASan's own advice
# (-O1 or more), and half the unit tests' time of -O0
build-asan: deps
	@test -f build-asan/build.ninja || meson setup build-asan -Dbuildtype=debugoptimized \
		-Db_sanitize=address,undefined -Db_lundef=false
	@meson configure build-asan | grep -q '^ *buildtype *debug ' && \
		meson configure build-asan -Dbuildtype=debugoptimized || true
	@ninja -C build-asan

build-fuzz: deps
	@test -f build-fuzz/build.ninja || CC=clang meson setup build-fuzz -Dfuzz=true \
		-Db_sanitize=address,undefined -Db_lundef=false
	@ninja -C build-fuzz

# grows each corpus for FUZZ_SECONDS per target; new inputs land in tests/fuzz/corpus
fuzz: build-fuzz
	@for t in $$(ls tests/fuzz/corpus); do \
		echo "== fuzz_$$t"; \
		build-fuzz/tests/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=8192 \
			-dict=tests/fuzz/json.dict tests/fuzz/corpus/$$t || exit 1; \
	done

up: build
	build/tenk up $(UP_ARGS)

check: build build-asan
	@scripts/check

bench: build
	@bench/run

# tenk, the tenk-daemon it execs for daemons and tools, and the shim the
# agent starts for each attempt, side by side
install: build
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 build/tenk build/tenk-daemon build/tenk-shim $(DESTDIR)$(PREFIX)/bin/
	install -D -m 0644 contrib/bash-completion/tenk \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/tenk

clean:
	rm -rf build build-asan build-fuzz
