# One entry point. `make test` runs every test (installing what is missing); `make bench` runs the
# design's benchmark against a private local Redis; `make demo` shows one key being limited.
.PHONY: build test fuzz soak bench bench-grpc bench-http bench-python bench-serve throughput demo scenarios hotkey clean dist install matrix

build:
	cargo build --release -p rl-cli

test:
	bash scripts/test-all.sh

# The core and topology suites against every server scripts/servers.sh installs (Redis 7.4, Redis
# 8.2, Valkey 8.1); `make test` runs Redis 7.4 and Valkey 8.1 of them.
matrix:
	bash scripts/servers.sh >/dev/null
	bash scripts/toxiproxy.sh
	bash scripts/matrix.sh

# The installable artifacts for linux-x86_64 in dist/: Python wheel + sdist, npm tarballs (main +
# prebuilt addon), Maven jar + sources + javadoc + pom, the C SDK tarball, the `rl` binary.
dist:
	bash scripts/dist.sh

# The C SDK (lib/librl.so.X.Y.Z + symlinks, lib/librl.a, include/rl.h, lib/pkgconfig/rl.pc):
# the same tree as dist/rl-<version>-linux-x86_64.tar.gz, under $(DESTDIR)$(PREFIX).
PREFIX ?= /usr/local
install:
	bash scripts/dist.sh c
	mkdir -p "$(DESTDIR)$(PREFIX)"
	cp -R --preserve=mode,links,timestamps "$${CARGO_TARGET_DIR:-target}"/dist-stage/c/rl-$$(python3 scripts/check-versions.py --get)-linux-x86_64/. "$(DESTDIR)$(PREFIX)/"

# The long fuzz run: cargo-fuzz (nightly) on the URL, options and policy parsers and rl serve's
# policies-file loader, FUZZ_SECONDS each (default 600), then SCRIPT_FUZZ_CASES (default 100000)
# random script calls against a private redis-server. `make test` runs the short version on stable (seeds + a few seconds).
fuzz:
	bash scripts/fuzz.sh

# Hours of mixed load (thousands of keys, random costs, 5 limiters) against a private redis-server
# behind Toxiproxy and a Sentinel trio, with a fault every SOAK_FAULT_EVERY (latency, blackhole,
# reset_peer, restart, failover): asserts flat RSS/fds/Redis memory/DBSIZE and exact windows,
# prints a summary table and writes target/soak/soak.png. `make test` runs a 60 s version.
SOAK_DURATION ?= 2h
SOAK_FAULT_EVERY ?= 60s
soak: build
	target/release/rl soak --duration $(SOAK_DURATION) --fault-every $(SOAK_FAULT_EVERY) --plot target/soak/soak.png $(SOAK_ARGS)

bench: build
	target/release/rl bench

# Envoy's gRPC rate-limit service: envoyproxy/ratelimit (fixed window, built from the Go module
# proxy) beside `rl serve --grpc` on the same private redis-server and the same load generator:
# decisions/s, P99, and the most admitted in any window across a window boundary.
bench-grpc:
	bash serve/bench/grpc.sh

# Python: rl vs `limits` (redis-py + hiredis), 1 and 16 threads, one key and 100k keys, pinned
# and unpinned, against a private redis-server (release wheel in target/py-bench-venv).
bench-python:
	bash bindings-python/bench/run.sh $(BENCH_ARGS)

# Issue 14's HTTP benchmark: wrk against each framework's tiny app without a limiter, with rl's
# middleware and with the ecosystem's peer (one key, load above the limit). Each binding adds a line.
bench-http:
	bash bindings-python/bench/http/run.sh $(BENCH_HTTP_ARGS)
	bash bindings-node/bench/http/run.sh
	bash bindings-java/bench/http/run.sh
	APP=servlet bash bindings-java/bench/http/run.sh

# The design's section-4 gateway benchmark, as written: wrk -t8 -c100 --latency against rl serve in
# proxy mode (1, 2 and 4 processes on one local Redis) and behind nginx auth_request.
bench-serve:
	bash serve/bench/run.sh

throughput: build
	target/release/rl throughput

# Sliding window vs an INCR fixed window on the same bursty load, against a private redis-server:
# the fixed window lets through up to twice the limit across a boundary; rl never exceeds it.
demo: build
	target/release/rl bench --compare fixed-window --instances 4 --rate 250 --limit 1000 --duration 4s

# The fault scenarios (frozen, down at startup, OOM, Sentinel failover, Cluster migration, network
# faults through a TCP fault proxy, clock skew) against real servers, printing the measured figures.
scenarios:
	bash scripts/scenarios.sh

clean:
	cargo clean

# The design's scenario C: one hot key, 8 instances, offered 4x what the plain per-request path
# decides; plain, coalescing, leases and leases + denial cache side by side (sharded too when
# --redis names a Cluster), against a private redis-server. HOTKEY_ARGS adds flags, e.g.
# HOTKEY_ARGS="--processes 8".
hotkey: build
	target/release/rl bench --scenario hot-key --duration 5s $(HOTKEY_ARGS)
