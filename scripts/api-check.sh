#!/usr/bin/env bash
# Compares the public API of our crates with the published releases a user
# switches from (minitrace and minitrace-jaeger 0.6.7, minstant 0.1.7), with
# cargo-semver-checks: a pub item or a feature removed, renamed or changed in
# a way that breaks a 0.6 user's build fails this script. minitrace-macro is
# a proc-macro crate, which has no API that the tool can read: the compat
# crate's tests (compat/tests/macro_api.rs) use its macros as 0.6 code does.
# cargo-semver-checks, pinned below, is installed by the set-up step
# (`bash scripts/setup.sh semver`), never here. Part of scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

SEMVER_CHECKS_VERSION=0.51.0
if [[ "$(cargo semver-checks --version 2>/dev/null)" != "cargo-semver-checks $SEMVER_CHECKS_VERSION" ]]; then
    echo "api-check.sh: cargo-semver-checks $SEMVER_CHECKS_VERSION is missing: run bash scripts/setup.sh semver" >&2
    exit 1
fi

# Each crate against its published baseline, all features on (the API a
# user enabling `enable` sees is the larger one).
status=0
for crate_and_baseline in minitrace=0.6.7 minitrace-jaeger=0.6.7 minstant=0.1.7; do
    crate=${crate_and_baseline%=*} baseline=${crate_and_baseline#*=}
    if ! cargo semver-checks check-release --package "$crate" --baseline-version "$baseline" \
        --release-type minor --all-features; then
        echo "api-check.sh: $crate breaks the API of its published $baseline" >&2
        status=1
    fi
done
exit $status
