#!/usr/bin/env python3
"""Checks the core's speed targets (issue 3) over several runs of their rows.

One run of the whole suite (scripts/bench.sh) gives one ratio per target.
This script runs only the rows that the targets are computed from, ROUNDS
times (each round one `cargo bench` run, so every ratio still comes from
rows of the same run), and prints each target's ratio per round, their
median and range, and whether the target was met in every round, in the
median only, or not. A round in which our row dropped spans (the delivery
ledger that benches/spans.rs writes) is flattered: it is printed as
"dropped N", left out of the median and range, and never counts as met.
Beside the request targets it prints the medians of two floors in the same
rounds: the clock reads alone, and the design floor (benches/design_floor/),
a minimal tracer built the way this workspace is. A last table gives our
nanoseconds over the design floor per round: what our API, guarantees and
implementation add, a gap that does not involve fastrace's row.

Python 3 standard library only; reads criterion's output and the delivery
ledger with scripts/bench-report.py's readers.

    python3 scripts/targets.py [--rounds N] [--measurement-time S]
"""

import argparse
import importlib.util
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OURS = "minitrace (this workspace)"
FASTRACE = "fastrace 0.7"


def load_report():
    spec = importlib.util.spec_from_file_location("bench_report", os.path.join(REPO, "scripts", "bench-report.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Target:
    name: str
    group: str
    goal: float
    param: str = ""
    # Subtracted from both rows: the ratio is of the cost added to it.
    baseline: Optional[str] = None
    # Shown beside the ratio, by column name (FLOOR_NAMES): these rows'
    # added cost over fastrace's. The clock floor is the part of the ratio
    # that no tracer reading the clock can avoid; the design floor, what a
    # minimal tracer of this design reaches (benches/design_floor/).
    floors: tuple = ()
    # An absolute goal in nanoseconds per span (`spans` per iteration)
    # instead of a ratio to fastrace.
    spans: Optional[int] = None

    def value(self, rows):
        """This round's ratio (or ns per span), and each floor's ratio."""
        ours = rows[OURS][self.param]
        if self.spans is not None:
            return ours / self.spans, {}
        base = rows[self.baseline][""] if self.baseline else 0.0
        fastrace = rows[FASTRACE][self.param] - base
        floors = {column: (rows[row][""] - base) / fastrace for column, row in self.floors}
        return (ours - base) / fastrace, floors

    def dropped(self, delivery):
        """Spans our sink did not receive in this round's benchmark (0 for a
        row without a sink)."""
        made, received = delivery.get((self.group, self.param, OURS), (0, 0))
        return max(0, made - received)

    def over_floor(self, rows, column):
        """This round's nanoseconds of ours over the floor `column`, or None:
        a gap that fastrace's round-to-round swings do not move."""
        row = dict(self.floors).get(column)
        return rows[OURS][self.param] - rows[row][""] if row else None


REQUEST_BASELINE = "untraced"
DESIGN_FLOOR = "design floor"
REQUEST_FLOORS = (
    ("clock floor", "clock reads only (untraced + 2 per span)"),
    (DESIGN_FLOOR, "design floor (a minimal tracer of this design)"),
    ("design floor, records on the traced thread", "design floor, records made on the traced thread"),
)
FLOOR_NAMES = tuple(column for column, _ in REQUEST_FLOORS)
TARGETS = [
    Target("1 root + 100 local spans, wide", "local spans, wide", 0.35, param="100"),
    Target("1 root + 100 local spans, deep", "local spans, deep", 0.35, param="100"),
    Target(
        "~1 µs request, independent steps: added cost",
        "1 µs request, 1 root + 9 children",
        0.2,
        baseline=REQUEST_BASELINE,
        floors=REQUEST_FLOORS,
    ),
    Target(
        "~1 µs request, chained steps: added cost",
        "1 µs request, chained steps, 1 root + 9 children",
        0.2,
        baseline=REQUEST_BASELINE,
        floors=REQUEST_FLOORS,
    ),
    Target(
        "1 000 Spans ended on another thread (hand-off CPU excluded)",
        "Span with explicit parent, finished on another thread",
        0.5,
        baseline="hand-off only, untraced",
    ),
    Target("no reporter set, ns per span", "no reporter, 1 root + 100 local spans", 4.0, spans=101),
]

# Exactly the rows above: criterion matches the regex against
# "group/function[/parameter]".
FILTER = "|".join(
    [
        r"^local spans, (wide|deep)/(minitrace \(this workspace\)|fastrace 0\.7)/100$",
        r"^1 µs request.*/(untraced|clock reads only.*|design floor.*|minitrace \(this workspace\)|fastrace 0\.7)$",
        r"^Span with explicit parent.*/(hand-off only, untraced|minitrace \(this workspace\)|fastrace 0\.7)$",
        r"^no reporter.*/minitrace \(this workspace\)$",
    ]
)


def run_round(warm_up, measurement):
    command = [
        "cargo", "bench", "--bench", "spans", "--bench", "no_reporter", "--",
        "--warm-up-time", str(warm_up), "--measurement-time", str(measurement), "--noplot", FILTER,
    ]
    subprocess.run(command, cwd=REPO, check=True, stdout=subprocess.DEVNULL)


def fmt(target, value):
    return f"{value:.2f} ns" if target.spans is not None else f"×{value:.2f}"


def fmt_round(target, value, dropped):
    return f"dropped {dropped}" if dropped else fmt(target, value)


def verdict(target, values, dropped):
    """Met in every round, in the median, or not; a round whose row dropped
    spans is flattered, so it counts as not met."""
    missed = [d > 0 or v > target.goal for v, d in zip(values, dropped)]
    with_drops = sum(d > 0 for d in dropped)
    drops = f", {with_drops} of them with dropped spans" if with_drops else ""
    if not any(missed):
        return "met in every round"
    if statistics.median(math.inf if d else v for v, d in zip(values, dropped)) <= target.goal:
        return f"met in the median, not in {sum(missed)} of {len(values)} rounds{drops}"
    return f"**not met** in {sum(missed)} of {len(values)} rounds{drops}"


def summary(target, values, dropped):
    """Median and range of the rounds without dropped spans."""
    clean = [v for v, d in zip(values, dropped) if not d]
    if not clean:
        return "—", "—"
    of = f" ({len(clean)} of {len(values)} rounds)" if len(clean) < len(values) else ""
    return f"{fmt(target, statistics.median(clean))}{of}", f"{fmt(target, min(clean))}–{fmt(target, max(clean))}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warm-up-time", type=float, default=1)
    parser.add_argument("--measurement-time", type=float, default=3)
    args = parser.parse_args()
    report = load_report()
    criterion_dir = os.path.join(REPO, "target", "criterion")

    subprocess.run(["cargo", "bench", "--no-run", "--bench", "spans", "--bench", "no_reporter"], cwd=REPO, check=True)
    values = {target.name: [] for target in TARGETS}
    floors = {target.name: [] for target in TARGETS}
    dropped = {target.name: [] for target in TARGETS}
    over_design = {target.name: [] for target in TARGETS}
    for round_number in range(1, args.rounds + 1):
        print(f"targets.py: round {round_number} of {args.rounds}", file=sys.stderr)
        start = time.time()
        run_round(args.warm_up_time, args.measurement_time)
        results, _ = report.read_results(criterion_dir, start)
        delivery = report.read_delivery(criterion_dir, start)
        for target in TARGETS:
            value, round_floors = target.value(results[target.group])
            values[target.name].append(value)
            floors[target.name].append(round_floors)
            dropped[target.name].append(target.dropped(delivery))
            gap = target.over_floor(results[target.group], DESIGN_FLOOR)
            if gap is not None:
                over_design[target.name].append(gap)
    print_tables(args.rounds, values, floors, dropped, over_design)


def print_tables(rounds, values, floors, dropped, over_design):
    """The tables, from per-target lists with one entry per round."""
    print(f"Speed targets over {rounds} rounds (`python3 scripts/targets.py --rounds {rounds}`); "
          "ratios to fastrace 0.7 in the same round, medians of criterion's samples. \"dropped N\": our "
          "sink did not receive N spans in that round, which flatters it; such a round is left out of the "
          "median and range and never counts as met.\n")
    print("| target | goal | per round | median | range | " + " | ".join(f"{n} (median)" for n in FLOOR_NAMES)
          + " | verdict |")
    print("|---|---:|---|---:|---:|" + "---:|" * len(FLOOR_NAMES) + "---|")
    for target in TARGETS:
        got, lost = values[target.name], dropped[target.name]
        median, spread = summary(target, got, lost)
        medians = [
            f"×{statistics.median(r[column] for r in floors[target.name]):.2f}"
            if column in dict(target.floors) else ""
            for column in FLOOR_NAMES
        ]
        print(
            f"| {target.name} | ≤ {fmt(target, target.goal)} "
            f"| {', '.join(fmt_round(target, v, d) for v, d in zip(got, lost))} "
            f"| {median} | {spread} | {' | '.join(medians)} | {verdict(target, got, lost)} |"
        )

    print("\nOurs over the design floor, ns per iteration (what our API, guarantees and implementation add):\n")
    print("| target | per round | median |")
    print("|---|---|---:|")
    for target in TARGETS:
        gaps, lost = over_design[target.name], dropped[target.name]
        if gaps:
            clean = [gap for gap, d in zip(gaps, lost) if not d]
            per_round = ", ".join(f"dropped {d}" if d else f"{gap:+.0f}" for gap, d in zip(gaps, lost))
            print(f"| {target.name} | {per_round} | {f'{statistics.median(clean):+.0f}' if clean else '—'} |")


if __name__ == "__main__":
    main()
