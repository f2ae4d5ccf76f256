#!/usr/bin/env bash
# Runs the whole benchmark suite in one run (every contender side by side:
# benches/spans.rs, no_reporter.rs, clock.rs, channel.rs, fates.rs, otlp.rs,
# bridge.rs; then export.rs, whole processes against a receiver), then writes
# BENCHMARKS.md and benchmarks.svg from criterion's output with
# scripts/bench-report.py.
#
#   bash scripts/bench.sh              # the whole suite: ~10 minutes on 2 cores, plus the build
#   bash scripts/bench.sh 'wide/'      # only benchmarks whose id matches a regex
#
# Timing per benchmark, in seconds: BENCH_WARM_UP (default 1) and
# BENCH_MEASUREMENT (default 3); ~120 benchmarks, ~4.5 s each with
# criterion's analysis. Extra arguments go to criterion (a filter regex).
# Run it on an otherwise idle machine: most numbers are CPU time of the whole
# process, and the 2-thread group needs both cores.
set -euo pipefail
cd "$(dirname "$0")/.."

WARM_UP=${BENCH_WARM_UP:-1}
MEASUREMENT=${BENCH_MEASUREMENT:-3}

# The commit the benches are built from, read before the build: the tree may
# change during a run.
commit=$(python3 scripts/bench-report.py --print-commit)

# Build first, so that the results' timestamps (--since) start after it.
cargo bench --no-run --bench spans --bench no_reporter --bench clock --bench channel --bench fates --bench otlp --bench bridge --bench export

start=$(date +%s)
command=(
    cargo bench --bench spans --bench no_reporter --bench clock --bench channel --bench fates --bench otlp --bench bridge --
    --warm-up-time "$WARM_UP" --measurement-time "$MEASUREMENT" --nresamples 10000 "$@"
)
printf -v command_line '%q ' "${command[@]}"
echo "bench.sh: ${command_line% }" >&2
"${command[@]}"
# The export bench (not criterion: whole processes against a receiver),
# unless only some benchmarks were asked for. It writes
# target/criterion/export.md.
if [ $# -eq 0 ]; then
    export_command=(env "EXPORT_RUNS=${EXPORT_RUNS:-3}" cargo bench --bench export)
    printf -v export_line '%q ' "${export_command[@]}"
    echo "bench.sh: ${export_line% }" >&2
    "${export_command[@]}"
    command_line+="; ${export_line% }"
fi

python3 scripts/bench-report.py --since "$start" --command "${command_line% }" --commit "$commit"
