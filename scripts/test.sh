#!/usr/bin/env bash
# Runs every test of the workspace, the Jaeger end-to-end tests included.
# This is the README's test command and what CI runs (.ci/run); it exits
# non-zero when any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."

# A local Jaeger on 127.0.0.1 for minitrace-jaeger's and minitrace-otlp's
# end-to-end tests (built on first use). Under CI=true a Jaeger that cannot
# be started is a failure.
jaeger_was_running=false
bash scripts/jaeger.sh status && jaeger_was_running=true
if ! bash scripts/jaeger.sh start; then
    [ "${CI:-}" = true ] && exit 1
    echo "test.sh: no Jaeger: the end-to-end tests will be skipped" >&2
fi
$jaeger_was_running || trap 'bash scripts/jaeger.sh stop' EXIT

# The core's modules in layers: no import cycle, no file over 600 lines.
python3 scripts/module-check.py

cargo test --workspace --release

# minitrace-otlp's optional transports, which no crate of the workspace
# enables, so the run above builds none: its tests again with OTLP/gRPC,
# OTLP/HTTP JSON and TLS, the gRPC and JSON end-to-end tests included.
cargo test -p minitrace-otlp --release --all-features
cargo test -p minitrace-jaeger --release --features tls
# The delivery layer both reporters share, with its TLS tests.
cargo test -p minitrace-delivery --release --all-features

# minstant's `fallback-coarse` feature, which no crate of the workspace
# enables, so the run above never builds it: its tests again with the
# fallback reading CLOCK_MONOTONIC_COARSE.
cargo test -p minstant --release --features fallback-coarse

# A 0.6 user's switch: crates built on minitrace 0.6.7 from crates.io
# (minitrace-opentelemetry to the Jaeger above, minitrace-datadog to a
# stand-in agent) on this workspace's core, then our public API against the
# published releases.
cargo test --release --manifest-path compat/ecosystem/Cargo.toml --target-dir target
bash scripts/api-check.sh
