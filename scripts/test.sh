#!/usr/bin/env bash
# Runs every test of the workspace. This is the README's test command and
# what CI runs (.ci/run); it exits non-zero when any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --workspace --release
