# One entry point. `make test` runs every test (installing what is missing); `make bench` runs the
# design's benchmark against a private local Redis; `make demo` shows one key being limited.
.PHONY: build test bench bench-http bench-python throughput demo scenarios hotkey clean

build:
	cargo build --release -p rl-cli

test:
	bash scripts/test-all.sh

bench: build
	target/release/rl bench

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
