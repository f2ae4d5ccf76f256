#!/usr/bin/env bash
# Runs every test of the workspace, the Jaeger end-to-end tests and the
# headless-browser checks included, and the checks of the code itself. This
# is the README's test command and what CI runs (.ci/run); it exits non-zero
# when anything fails.
#
# First the set-up step installs what the tests use (scripts/setup.sh: once,
# serially, idempotent; no test installs anything). Under CI=true a part it
# could not install fails the run; elsewhere the tests that need it are
# skipped, and say so.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! bash scripts/setup.sh; then
    [ "${CI:-}" = true ] && { echo "test.sh: the set-up step failed" >&2; exit 1; }
    echo "test.sh: the set-up step failed: the tests that need what it lacks will be skipped" >&2
fi

# The code's own checks: formatting, lints as errors, docs without warnings,
# and the core's modules in layers (no import cycle, no file over 600 lines).
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --all-features --release -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --all-features --release
python3 scripts/module-check.py

# A local Jaeger on 127.0.0.1 for minitrace-jaeger's and minitrace-otlp's
# end-to-end tests. Under CI=true a Jaeger that cannot be started is a
# failure.
jaeger_was_running=false
bash scripts/jaeger.sh status && jaeger_was_running=true
if ! bash scripts/jaeger.sh start; then
    [ "${CI:-}" = true ] && exit 1
    echo "test.sh: no Jaeger: the end-to-end tests will be skipped" >&2
fi
$jaeger_was_running || trap 'bash scripts/jaeger.sh stop' EXIT

cargo test --workspace --release

# The handover between traced threads and the collector, under the model
# checker loom: every interleaving of writers and harvests (a few seconds).
cargo test -p minitrace --release --lib --features loom loom

# minitrace-otlp's optional transports, which no crate of the workspace
# enables, so the run above builds none: its tests again with OTLP/gRPC,
# OTLP/HTTP JSON and TLS, the gRPC and JSON end-to-end tests included.
cargo test -p minitrace-otlp --release --all-features
cargo test -p minitrace-jaeger --release --features tls
# The delivery layer both reporters share, with its TLS tests.
cargo test -p minitrace-delivery --release --all-features
cargo test -p minitrace-tower -p minitrace-reqwest --release --all-features
cargo test -p minitrace --release --features futures --test streams

# minstant's `fallback-coarse` feature, which no crate of the workspace
# enables, so the run above never builds it: its tests again with the
# fallback reading CLOCK_MONOTONIC_COARSE.
cargo test -p minstant --release --features fallback-coarse

# minstant's and minitrace's tests again for aarch64 Linux, under qemu:
# the clock's counter path there (CNTVCT_EL0), which no x86 run builds.
# What it needs comes from the set-up step (scripts/setup.sh aarch64);
# without it the script says SKIPPED, or fails under CI=true.
bash scripts/aarch64-test.sh

# A 0.6 user's switch: crates built on minitrace 0.6.7 from crates.io
# (minitrace-opentelemetry to the Jaeger above, minitrace-datadog to a
# stand-in agent) on this workspace's core, then our public API against the
# published releases.
cargo test --release --manifest-path compat/ecosystem/Cargo.toml --target-dir target
bash scripts/api-check.sh
