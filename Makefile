# One entry point. `make test` runs every test (installing what is missing); `make bench` runs the
# design's benchmark against a private local Redis; `make demo` shows one key being limited.
.PHONY: build test bench throughput demo clean

build:
	cargo build --release -p rl-cli

test:
	bash scripts/test-all.sh

bench: build
	target/release/rl bench

throughput: build
	target/release/rl throughput

demo: build
	@echo "limit 3 per 10 s on key demo (memory backend, one process per call, so state lives in Redis only with --redis):"
	target/release/rl bench --instances 2 --rate 50 --limit 30 --window 1s --duration 3s

clean:
	cargo clean
