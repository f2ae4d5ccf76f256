#!/usr/bin/env python3
"""Writes BENCHMARKS.md and benchmarks.svg from criterion's output.

Reads every target/criterion/**/new/benchmark.json with its estimates.json
beside it (the median point estimate, in nanoseconds per iteration), and
the sink descriptions and span counts that benches/spans.rs writes to
target/criterion/spans-sinks.tsv and spans-delivery.tsv. Writes a table per
benchmark group, each row's median and its ratio to this workspace's row
(the one named "... (this workspace)"), what each group's time is, the
machine (CPU model from /proc/cpuinfo, nproc), the commit, the date and the
command; and an SVG bar chart of the ratios (drawn by hand: no plotting
library), which BENCHMARKS.md embeds. Sentences about results are computed
from the rows.

Python 3 standard library only.

    python3 scripts/bench-report.py [--since EPOCH] [--command CMD] [--commit REV]
    python3 scripts/bench-report.py --print-commit

--since drops results older than a run's start (criterion keeps results of
benchmarks that a later run no longer has); scripts/bench.sh passes it, and
the commit it read with --print-commit before building.
"""

import argparse
import datetime
import glob
import json
import math
import os
import platform
import subprocess
import sys
from xml.sax.saxutils import escape

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The suite's groups in the order the benches run them; others follow,
# sorted by name.
GROUP_ORDER = [
    "local spans, wide",
    "local spans, deep",
    "1 µs request, 1 root + 9 children",
    "1 µs request, chained steps, 1 root + 9 children",
    "Span with explicit parent, finished on another thread",
    "async, N awaits, each step a child span",
    "async, N awaits, in_span + enter_on_poll",
    "2 threads at once, 1 root + 100 local spans each",
    "no reporter, 1 root + 100 local spans",
    "now",
    "reading to Unix time",
    "queue to the collector, 2 producers",
] + [
    f"fates, 1 root + 9 local spans, {threads} producer(s), {pace}"
    for threads in (1, 2)
    for pace in ("~33 ns steps", "flat out")
]
FATES_GROUPS = set(GROUP_ORDER[-4:])
OTLP_GROUP = "otlp encode, 10 spans (3 attributes, 1 event)"
OTLP_BATCH_GROUP = "otlp encode, a collector's batch (4 096 spans, 10 per trace)"
BRIDGE_GROUP = "tracing spans through a bridge, 1 root + 10 spans"
RETRIEVAL_GROUP = "retrieval of one trace from 2 threads x 8 MiB"
GROUP_ORDER += [BRIDGE_GROUP, OTLP_GROUP, OTLP_BATCH_GROUP, RETRIEVAL_GROUP]
FATES_REFERENCE = "minitrace (this workspace), reporting all"
FLOOR = "clock floor (20 clock reads)"
RECORDER_FLOOR = "recorder floor (clock reads, 64 bytes a span into an 8 MiB ring)"

# What each group's workload is, printed under its heading. Descriptions
# only: sentences about results are computed (findings()).
GROUP_NOTES = {
    "local spans, wide": "1 root + N sibling local spans (each the local parent while it lives). "
    "N is the column; the spans per iteration are N + 1.",
    "local spans, deep": "1 root + N nested local spans. N is the column.",
    "1 µs request, 1 root + 9 children": "A request of nine traced steps of busy work (a `Step` of 100 "
    "iterations) under a root: 10 spans. The steps are independent of each other, so the CPU may overlap "
    "the end of one with the start of the next, unless something between them waits for the work before "
    "it. The last column is "
    "the cost of tracing as a share of the untraced request. The clock-reads row is the same request with "
    "only the clock reads this workspace makes for it (two per span) and nothing recorded; the fence row "
    "has one LFENCE per step and no clock read. The design-floor row is a minimal tracer of this "
    "workspace's design (`benches/design_floor/`): the same clock reads, each child recorded through a "
    "thread-local at both ends, one message per trace to a collector thread that makes the records, and "
    "nothing else (this workspace's API needs two messages per trace, for a root that may end later or "
    "elsewhere than its local spans, and adds nesting, bounds and loss accounting). The second "
    "design-floor row makes the records on the traced thread instead and publishes them per trace to a "
    "ring that the collector hands to the reporter without reading them.",
    "1 µs request, chained steps, 1 root + 9 children": "The same request with each step starting from "
    "the previous step's result, as the steps of a real request use each other's output, so no step can "
    "overlap the next.",
    "Span with explicit parent, finished on another thread": "1 root + 1 000 thread-safe spans with "
    "the root as explicit parent, handed to another thread that ends them, the two threads kept on two "
    "different CPUs. What handing the spans over costs the two threads (sending, waiting, being woken "
    "up) is the bench's, not the library's, and is not charged; the baseline row is what is left of an "
    "untraced hand-off: dropping the items.",
    "async, N awaits, each step a child span": "A root task awaiting N steps that each suspend once, "
    "each step traced as a child span (minitrace: `in_span`, as `#[trace]` does; tracing: `Instrument`; "
    "OpenTelemetry: `with_context`; rustracing: a child span held across the await). N is the column.",
    "async, N awaits, in_span + enter_on_poll": "The task in its root span (`in_span`) with a local "
    "span around each of its N + 1 polls (`enter_on_poll`); only the minitrace-API libraries have that "
    "adapter. N is the column.",
    "2 threads at once, 1 root + 100 local spans each": "Both cores producing: two long-lived threads "
    "each make a trace of 1 root + 100 local spans per iteration, while the library's collector or "
    "export thread (if any) competes with them for the cores.",
    "no reporter, 1 root + 100 local spans": "Tracing compiled in, nothing collecting (no reporter, no "
    "subscriber, no provider). The untraced row is the workload with its spans removed, an empty loop. "
    "minitrace built without its `enable` feature has no row: one bench build has one set of features.",
    "now": "Reading each clock once.",
    "reading to Unix time": "1 024 readings converted to Unix nanoseconds with an anchor taken once "
    "(`Instant::as_unix_nanos`): what minitrace's collector does for each end of each span it reports.",
    "queue to the collector, 2 producers": "The queue from traced threads to the collector: a ring per "
    "thread (what minitrace uses) against one shared channel. Neither consumer busy-waits: the "
    "channel's blocks while the channel is empty, the rings' parks while every ring is empty, until a "
    "producer finds its ring full.",
}

GROUP_NOTES[OTLP_GROUP] = (
    "An OTLP exporter's encoding step, no network: 10 finished spans (3 attributes and 1 event each) "
    "turned into the protobuf bytes of one `ExportTraceServiceRequest`. Ours from `SpanRecord`s; "
    "opentelemetry-otlp's path is what its exporter runs on the SDK's `SpanData` (opentelemetry-proto's "
    "grouping by resource and scope, then prost), called directly."
)
GROUP_NOTES[OTLP_BATCH_GROUP] = (
    "The export workload's spans (traces of 1 root + 9 spans, 2 string attributes each) in one of the "
    "collector's batches to the reporter, encoded by `encode_each` into reused buffers: ~1 MiB of records "
    "and properties, more than a core's L2 holds."
)
GROUP_NOTES[RETRIEVAL_GROUP] = (
    "Two threads fill 8 MiB of flight-recorder memory each with thrown-away requests (1 root + 9 local "
    "spans, flat out) until it wraps, then stay alive; one trace is asked for by id (`recorder::trace`), "
    "a different one each time, and comes back whole."
)
GROUP_NOTES[BRIDGE_GROUP] = (
    "A root and 10 tokio `tracing` spans per iteration, each recorded through a bridge: ours "
    "(`minitrace-tracing`'s layer, under a minitrace root), fastrace's compatibility layer under a "
    "fastrace root, and tracing's own Registry with a layer that records every span (and with it off). "
    "The `minitrace native` rows are the floor's minitrace part: the same spans made with minitrace's own "
    "API and no `tracing` (a thread-safe span made the local parent, as the layer records each span, or a "
    "local span; with the layer's properties, or none)."
)

for _fates in FATES_GROUPS:
    GROUP_NOTES[_fates] = (
        "A request of 1 root + 9 local spans (steps of ~33 ns of chained busy work between the spans, or "
        "none: flat out) by its trace's fate: ours reporting it (also under the lossless policy, "
        "`wait_when_queue_full`), thrown away by the latency threshold or by `cancel()`, left out by head "
        "sampling, or begun with recording switched off; fastrace 0.7 reporting it and cancelling its root; "
        "tokio `tracing` with a bare `Registry`. The clock floor is the same request with only the 20 clock "
        "reads ours makes. With the flight recorder on, the threshold row keeps every request in it as well "
        "(8 MiB per thread, and 256 KiB, which stays in cache); the recorder floor is the clock floor plus "
        "each span's 64 bytes written into an 8 MiB ring per thread, the least a recorder keeping such spans "
        "does. "
        "Long-lived producer threads run the requests at once. The sentence under the "
        "table gives each of our rows' cost over the untraced request as a multiple of the clock floor's."
    )

# What benches/contenders/mod.rs `measure` charges: process CPU time over
# batches of iterations that end with the library's flush.
CPU_WITH_FLUSH = "CPU time of the whole process per iteration, the library's flush included"

# What each group's time is, read from the bench that measures it: under each
# heading of BENCHMARKS.md and each group of the chart.
GROUP_MEASURES = {
    "local spans, wide": CPU_WITH_FLUSH,
    "local spans, deep": CPU_WITH_FLUSH,
    "1 µs request, 1 root + 9 children": CPU_WITH_FLUSH + " (rows without a tracer have nothing to flush)",
    "1 µs request, chained steps, 1 root + 9 children": CPU_WITH_FLUSH
    + " (rows without a tracer have nothing to flush)",
    "Span with explicit parent, finished on another thread": CPU_WITH_FLUSH
    + ", minus the hand-off's CPU time on both threads",
    "async, N awaits, each step a child span": CPU_WITH_FLUSH + " (the untraced row has nothing to flush)",
    "async, N awaits, in_span + enter_on_poll": CPU_WITH_FLUSH + " (the untraced row has nothing to flush)",
    "2 threads at once, 1 root + 100 local spans each": CPU_WITH_FLUSH,
    "no reporter, 1 root + 100 local spans": "wall time per iteration on the bench thread; nothing is "
    "collected, so no flush",
    "now": "wall time per read",
    "reading to Unix time": "wall time per 1 024 conversions",
    "queue to the collector, 2 producers": "CPU time of the whole process per iteration (a message from "
    "each producer), until the consumer has taken every message",
}
for _fates in FATES_GROUPS:
    GROUP_MEASURES[_fates] = (
        "CPU time of the whole process per request (a batch's CPU time, the library's flush included, "
        "over the requests all producers made)"
    )
GROUP_MEASURES[OTLP_GROUP] = "wall time per 10 spans encoded, on the bench thread"
GROUP_MEASURES[OTLP_BATCH_GROUP] = "wall time per batch of 4 096 spans encoded, on the bench thread"
GROUP_MEASURES[BRIDGE_GROUP] = CPU_WITH_FLUSH
GROUP_MEASURES[RETRIEVAL_GROUP] = "wall time per trace retrieved, on the bench thread"
UNKNOWN_MEASURE = "not described in scripts/bench-report.py: see the bench"

# Groups whose table has a column of the cost of tracing over the untraced row.
OVERHEAD_GROUPS = {"1 µs request, 1 root + 9 children", "1 µs request, chained steps, 1 root + 9 children"}
OVERHEAD_GROUPS |= FATES_GROUPS

# The reference row of groups without a "(this workspace)" row.
REFERENCES = {"queue to the collector, 2 producers": "rtrb ring per thread", OTLP_GROUP: "minitrace-otlp",
              OTLP_BATCH_GROUP: "minitrace-otlp, encode_each"}
REFERENCES.update({group: FATES_REFERENCE for group in FATES_GROUPS})

# Rows that are baselines, not contenders: shown in the tables, not charted.
BASELINE_PREFIXES = ("untraced", "hand-off only", "clock reads only", "fence only", "design floor", "clock floor",
                     "recorder floor", "minitrace native")

LOSS_FLAG = 0.001  # a sink that received less than 99.9 % of the spans


def is_baseline(name):
    return name.startswith(BASELINE_PREFIXES)


def is_reference(name):
    return name.endswith("(this workspace)")


def fmt_time(ns):
    if ns is None:
        return "—"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


def amount(ns):
    return fmt_time(ns) if ns >= 0 else "−" + fmt_time(-ns)


def fmt_ratio(ratio):
    if ratio is None:
        return "—"
    return f"×{ratio:.2f}" if ratio < 10 else f"×{ratio:.1f}"


def param_key(value):
    try:
        return (0, float(value), value)
    except ValueError:
        return (1, 0.0, value)


def read_results(criterion_dir, since):
    """{group: {function: {param: median_ns}}} and the newest result's mtime."""
    results = {}
    newest = 0.0
    pattern = os.path.join(criterion_dir, "**", "new", "benchmark.json")
    for path in glob.glob(pattern, recursive=True):
        estimates_path = os.path.join(os.path.dirname(path), "estimates.json")
        if not os.path.exists(estimates_path):
            continue
        mtime = os.path.getmtime(estimates_path)
        if since is not None and mtime < since:
            continue
        with open(path, encoding="utf-8") as f:
            benchmark = json.load(f)
        with open(estimates_path, encoding="utf-8") as f:
            estimates = json.load(f)
        median = estimates["median"]["point_estimate"]
        group = benchmark.get("group_id")
        function = benchmark.get("function_id") or group
        param = benchmark.get("value_str") or ""
        results.setdefault(group, {}).setdefault(function, {})[param] = median
        newest = max(newest, mtime)
    return results, newest


def read_tsv(path, since):
    if not os.path.exists(path) or (since is not None and os.path.getmtime(path) < since):
        return []
    with open(path, encoding="utf-8") as f:
        lines = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    return lines[1:]


def read_delivery(criterion_dir, since):
    """{(group, N, contender): (spans made, spans its sink received)}: the
    ledger that benches/contenders/mod.rs writes (N is "" in groups without
    a parameter)."""
    delivery = {}
    for row in read_tsv(os.path.join(criterion_dir, "spans-delivery.tsv"), since):
        if len(row) == 5:
            delivery[(row[0], row[1], row[2])] = (int(row[3]), int(row[4]))
    return delivery


def read_sinks(criterion_dir, since):
    """([(contender, where its sink works)], {(group, N, contender): share lost})."""
    sinks = [tuple(row[:2]) for row in read_tsv(os.path.join(criterion_dir, "spans-sinks.tsv"), since)]
    losses = {
        key: max(0, made - received) / made
        for key, (made, received) in read_delivery(criterion_dir, since).items()
        if made > 0
    }
    return sinks, losses


def retention_findings(criterion_dir, since):
    """How far back each thread's 8 MiB reached in the retrieval group's
    run: the table benches/fates.rs writes beside criterion's results."""
    rows = [row for row in read_tsv(os.path.join(criterion_dir, "recorder-retention.tsv"), since) if len(row) == 4]
    if not rows:
        return []
    parts = [
        f"thread {thread}: {int(held):,} requests in {int(size):,} bytes, "
        f"{int(held) / float(rate) * 1e3:.1f} ms at {float(rate) / 1e6:.2f} M requests/s"
        for thread, held, size, rate in rows
        if float(rate) > 0
    ]
    return [
        "History held, at the producers' flat-out rate in this run (how far back 8 MiB per thread "
        f"reaches): {'; '.join(parts)}."
    ]


EXPORT_HEADING = "every span exported, end to end, 1 root + 9 spans of 2 attributes"


def export_section(criterion_dir, since):
    """The tables benches/export.rs writes (it is not a criterion bench):
    a section of its own, after the criterion groups."""
    path = os.path.join(criterion_dir, "export.md")
    if not os.path.exists(path) or (since is not None and os.path.getmtime(path) < since):
        return []
    with open(path, encoding="utf-8") as f:
        parameters, _, tables = f.read().strip().partition("\n")
    return [
        f"## {EXPORT_HEADING}",
        "",
        "**Time:** CPU time (user + system, every thread) of each stack's process beyond the untraced "
        "run's, per span; `cargo bench --bench export` (benches/export.rs): each stack runs in a process of "
        "its own, the receiver in another, whose CPU is not counted.",
        "",
        "Requests of ~10 µs, each 1 root + 9 spans with 2 string attributes, every span exported over "
        "OTLP/HTTP protobuf (Thrift over HTTP for the Jaeger rows) to a receiver on 127.0.0.1 that answers "
        "at once and counts the spans it decodes. *untraced*: the baseline. *minitrace-otlp*: the default "
        "policy; *-lossless*: `wait_when_queue_full(true)`. *otel-sdk*: opentelemetry_sdk 0.33 + "
        "BatchSpanProcessor + opentelemetry-otlp; *fastrace-otel* and *tracing-otel* through the same "
        "exporter. *minitrace-discard*: recording and collecting, every report dropped. *floor-otlp*, "
        "*floor-jaeger*: recording, collecting and encoding each report into a reused buffer, nothing "
        "sent. *encode-only*: encoding records made once into a reused buffer, nothing else. *× OTel SDK*: "
        "CPU per delivered span over the SDK's; *delivered*: what the receiver decoded; *counted lost*: "
        "what the exporter counted as dropped.",
        "",
        parameters + ".",
        "",
        tables.strip(),
        "",
    ]


def ordered_groups(results):
    known = [g for g in GROUP_ORDER if g in results]
    return known + sorted(g for g in results if g not in GROUP_ORDER)


def ordered_rows(functions, contender_order):
    def key(name):
        if is_reference(name) or name in REFERENCES.values():
            rank = 0
        elif is_baseline(name):
            rank = 3
        elif name in contender_order:
            rank = 1
        else:
            rank = 2
        return (rank, contender_order.index(name) if name in contender_order else 0, name)

    return sorted(functions, key=key)


def reference_of(group, functions):
    if REFERENCES.get(group) in functions:
        return REFERENCES[group]
    refs = [name for name in functions if is_reference(name)]
    return refs[0] if refs else None


def machine():
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        nproc = subprocess.run(["nproc"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        nproc = str(len(os.sched_getaffinity(0)))
    memory = ""
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    memory = f", {int(line.split()[1]) / 1024 / 1024:.0f} GiB of memory"
                    break
    except (OSError, ValueError):
        pass
    try:
        rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        rustc = "rustc (unknown version)"
    return f"{model}, nproc = {nproc}{memory}; {platform.system()} {platform.release()}; {rustc}"


def commit():
    """HEAD's short hash, marked if the tree differs from it (this script's
    outputs aside)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        changes = subprocess.run(
            ["git", "status", "--porcelain", "--", ".", ":(exclude)BENCHMARKS.md", ":(exclude)benchmarks.svg"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head} with uncommitted changes" if changes else head


def fates_findings(functions):
    """Each of our rows' cost over the untraced request, as a multiple of the
    clock floor's, computed from this run's rows."""
    base, floor = functions.get("untraced", {}).get(""), functions.get(FLOOR, {}).get("")
    if base is None or floor is None or floor <= base:
        return []
    parts = [
        f"{name.split(', ', 1)[1]} ×{(ns - base) / (floor - base):.2f}"
        for name, values in sorted(functions.items())
        if name.startswith("minitrace (this workspace)") and (ns := values.get("")) is not None
    ]
    sentences = [
        f"The clock floor adds {amount(floor - base)} to the untraced request ({fmt_time(base)}). "
        f"Ours adds, as a multiple of that: {'; '.join(parts)}."
    ]
    ours = "minitrace (this workspace), thrown away by threshold"
    plain, recorded = functions.get(ours, {}).get(""), functions.get(f"{ours}, flight recorder on", {}).get("")
    if plain is not None and recorded is not None and plain > base:
        sentences.append(
            f"With the flight recorder keeping each request, a request thrown away adds "
            f"×{(recorded - base) / (plain - base):.2f} what it adds without it."
        )
    ring = functions.get(RECORDER_FLOOR, {}).get("")
    if ring is not None:
        sentences.append(
            f"The recorder floor (64 bytes a span written into an 8 MiB ring) adds ×{(ring - base) / (floor - base):.2f}."
        )
    return sentences


def findings(group, functions, reference):
    """Sentences about this run's rows of a request group, computed from them."""
    if group in FATES_GROUPS:
        return fates_findings(functions)
    if group not in OVERHEAD_GROUPS or reference is None:
        return []

    def median(prefix):
        name = next((n for n in functions if n.startswith(prefix)), None)
        return functions[name].get("") if name else None

    base, ours = median("untraced"), functions[reference].get("")
    if base is None or ours is None:
        return []
    added = ours - base
    clock, fence = median("clock reads only"), median("fence only")
    sentences = [f"In this run the untraced request takes {fmt_time(base)}."]
    if clock is not None and added > 0:
        sentences.append(
            f"The clock reads alone add {amount(clock - base)} to it, "
            f"{100 * (clock - base) / added:.0f} % of the {amount(added)} that {reference} adds."
        )
    if clock is not None and fence is not None and clock != base:
        sentences.append(
            f"The fences add {amount(fence - base)}, {100 * (fence - base) / (clock - base):.0f} % of what "
            "the clock reads add."
        )
    floors = [(name, functions[name].get("")) for name in functions if name.startswith("design floor")]
    gaps = [
        f"{fmt_time(abs(ours - ns))} {'more' if ours >= ns else 'less'} than the {name}"
        for name, ns in floors
        if ns is not None
    ]
    if gaps:
        sentences.append(f"Per request, {reference} costs {' and '.join(gaps)}.")
    return [" ".join(sentences)]


def group_table(group, functions, contender_order, losses):
    """Markdown lines of one group's table, and its footnotes."""
    rows = ordered_rows(functions, contender_order)
    params = sorted({p for values in functions.values() for p in values}, key=param_key)
    reference = reference_of(group, functions)
    ref_values = functions.get(reference, {}) if reference else {}
    baseline = next((r for r in rows if r.startswith("untraced")), None)
    overhead = baseline is not None and params == [""] and group in OVERHEAD_GROUPS
    notes = []
    flagged = {}  # contender: [(N, share lost)]

    def flag(name, param):
        loss = losses.get((group, param, name), 0.0)
        if loss >= LOSS_FLAG:
            flagged.setdefault(name, []).append((param, loss))
            return " ⚠"
        return ""

    lines = []
    if params == [""]:
        header = ["", "median", f"ratio to {reference or 'this workspace'}"]
        if overhead:
            header.append(f"overhead over {baseline}")
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" + "---:|" * (len(header) - 1))
        base_ns = functions[baseline].get("") if overhead else None
        for name in rows:
            ns = functions[name].get("")
            ref = ref_values.get("")
            ratio = ns / ref if ns and ref and not is_baseline(name) else None
            cells = [f"{name}{flag(name, '')}", fmt_time(ns), fmt_ratio(ratio)]
            if overhead:
                cells.append(
                    "—" if name == baseline or not base_ns or ns is None else f"{100 * (ns - base_ns) / base_ns:+.0f} %"
                )
            lines.append("| " + " | ".join(cells) + " |")
    else:
        lines.append("| | " + " | ".join(f"N = {p}" for p in params) + " |")
        lines.append("|---|" + "---:|" * len(params))
        for name in rows:
            cells = [name]
            for p in params:
                ns = functions[name].get(p)
                ref = ref_values.get(p)
                if ns is None:
                    cells.append("—")
                elif ref and name != reference and not is_baseline(name):
                    cells.append(f"{fmt_time(ns)} ({fmt_ratio(ns / ref)}){flag(name, p)}")
                else:
                    cells.append(f"{fmt_time(ns)}{flag(name, p)}")
            lines.append("| " + " | ".join(cells) + " |")
    for name, cells in flagged.items():
        where = "" if cells[0][0] == "" else " at " + ", ".join(f"N = {p}" for p, _ in cells)
        worst = max(loss for _, loss in cells)
        ratios = ", and the other rows' ratios to it too high" if name == reference else ""
        notes.append(
            f"⚠ {name}{where}: its sink did not receive every span (the library dropped up to "
            f"{100 * worst:.2g} % of them), so its numbers there are flattered{ratios}."
        )
    if reference is None:
        notes.append("No reference row in this group: medians only.")
    elif params != [""]:
        notes.append(f"In brackets: the ratio to {reference} for the same N.")
    return lines, notes


PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#bab0ac"]


def chart(results, groups, contender_order, losses):
    """The SVG text: per group and N, a bar per contender from ×1 (this
    workspace) to its ratio, on a log scale."""
    blocks = []  # (title, what its time is or None, bars)
    for group in groups:
        functions = results[group]
        reference = reference_of(group, functions)
        if reference != "minitrace (this workspace)":
            continue
        params = sorted({p for values in functions.values() for p in values}, key=param_key)
        caption = "Time: " + GROUP_MEASURES.get(group, UNKNOWN_MEASURE) + "."
        for p in params:
            ref = functions[reference].get(p)
            if not ref:
                continue
            bars = []
            for name in ordered_rows(functions, contender_order):
                ns = functions[name].get(p)
                if name == reference or is_baseline(name) or ns is None:
                    continue
                flagged = losses.get((group, p, name), 0.0) >= LOSS_FLAG
                bars.append((name, ns / ref, flagged))
            if bars:
                title = group if p == "" else f"{group}, N = {p}"
                blocks.append((title, caption, bars))
                caption = None
    if not blocks:
        return None

    ratios = [r for _, _, bars in blocks for _, r, _ in bars]
    ticks_all = [m * 10**e for e in range(-3, 4) for m in (1, 2, 5)]
    lo = max([t for t in ticks_all if t <= min(min(ratios), 1) * 0.95] or [ticks_all[0]])
    hi = min([t for t in ticks_all if t >= max(max(ratios), 1) * 1.05] or [ticks_all[-1]])
    ticks = [t for t in ticks_all if lo <= t <= hi]

    names = [n for n in contender_order if any(n == b[0] for _, _, bars in blocks for b in bars)]
    names += sorted({b[0] for _, _, bars in blocks for b in bars} - set(names))
    colour = {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}

    width, label_w, right_pad = 1000, 330, 70
    x0, x1 = label_w, width - right_pad
    row_h, head_h, caption_h, gap = 15, 20, 15, 10
    top = 70

    def x(ratio):
        return x0 + (x1 - x0) * (math.log10(ratio) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))

    height = top + sum(head_h + (caption_h if c else 0) + row_h * len(bars) + gap for _, c, bars in blocks) + 40
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        '<text x="10" y="22" font-size="15" font-weight="bold">Time per iteration, as a ratio to minitrace '
        "(this workspace): left of ×1 is faster, right is slower (log scale)</text>",
        '<text x="10" y="40" fill="#555">Medians per iteration, of the time that the line under each '
        "group's title names. ⚠: its sink did not receive every span (flattered).</text>",
    ]
    bottom = height - 30
    for t in ticks:
        tx = x(t)
        stroke = "#333" if t == 1 else "#ddd"
        out.append(f'<line x1="{tx:.1f}" y1="{top - 8}" x2="{tx:.1f}" y2="{bottom}" stroke="{stroke}"/>')
        label = f"×{t:g}"
        out.append(f'<text x="{tx:.1f}" y="{top - 12}" text-anchor="middle" fill="#555">{label}</text>')
        out.append(f'<text x="{tx:.1f}" y="{bottom + 14}" text-anchor="middle" fill="#555">{label}</text>')
    y = top
    for title, caption, bars in blocks:
        out.append(f'<text x="10" y="{y + 14}" font-weight="bold">{escape(title)}</text>')
        y += head_h
        if caption:
            out.append(f'<text x="10" y="{y + 10}" fill="#555">{escape(caption)}</text>')
            y += caption_h
        for name, ratio, flagged in bars:
            bx0, bx1 = sorted((x(1), x(ratio)))
            label = escape(name + (" ⚠" if flagged else ""))
            out.append(f'<text x="{x0 - 6}" y="{y + 11}" text-anchor="end">{label}</text>')
            out.append(
                f'<rect x="{bx0:.1f}" y="{y + 2}" width="{max(bx1 - bx0, 1):.1f}" height="{row_h - 4}" '
                f'fill="{colour[name]}"><title>{label}: {fmt_ratio(ratio)}</title></rect>'
            )
            if ratio >= 1:
                out.append(f'<text x="{bx1 + 4:.1f}" y="{y + 11}">{fmt_ratio(ratio)}</text>')
            else:
                out.append(f'<text x="{bx0 - 4:.1f}" y="{y + 11}" text-anchor="end">{fmt_ratio(ratio)}</text>')
            y += row_h
        y += gap
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--criterion-dir", default=os.path.join(REPO, "target", "criterion"))
    parser.add_argument("--out-md", default=os.path.join(REPO, "BENCHMARKS.md"))
    parser.add_argument("--out-svg", default=os.path.join(REPO, "benchmarks.svg"))
    parser.add_argument("--since", type=float, help="ignore results older than this Unix time")
    parser.add_argument("--command", default="bash scripts/bench.sh", help="the command that ran the benches")
    parser.add_argument("--commit", help="the commit the benches were built from (default: the tree's now)")
    parser.add_argument("--print-commit", action="store_true", help="print the tree's commit and exit")
    args = parser.parse_args()
    if args.print_commit:
        print(commit())
        return

    results, newest = read_results(args.criterion_dir, args.since)
    if not results:
        sys.exit(f"bench-report.py: no criterion results under {args.criterion_dir}")
    sinks, losses = read_sinks(args.criterion_dir, args.since)
    contender_order = [name for name, _ in sinks]
    groups = ordered_groups(results)

    svg = chart(results, groups, contender_order, losses)
    if svg is not None:
        with open(args.out_svg, "w", encoding="utf-8") as f:
            f.write(svg)

    date = datetime.datetime.fromtimestamp(newest, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    md = [
        "# Benchmarks",
        "",
        "Generated by `scripts/bench-report.py` from criterion's output; do not edit by hand.",
        "",
        f"- **Machine:** {machine()}",
        f"- **Commit:** {args.commit or commit()}",
        f"- **Date:** {date}",
        f"- **Command:** `{args.command}`",
        "",
        "Every contender runs in the same process and the same run, on the same workloads in its own "
        "idiom (benches/contenders/), with a sink that does the same job: collect every finished span and "
        "hand it to a reporter or exporter that discards it. Each number is the median, over criterion's "
        "samples, of the time per iteration that the **Time** line under its group's heading names. "
        "Where that is the CPU time of the whole process (all threads, collector and export threads "
        "included) over batches that end with the library's flush, collection work is charged to the "
        "library that causes it wherever it runs. Ratios are to the group's reference row (this "
        "workspace's, where it has one): below ×1 is faster, above is slower. Compare within one run only.",
        "",
    ]
    if svg is not None:
        md += [f"![Ratios to this workspace]({os.path.relpath(args.out_svg, os.path.dirname(args.out_md))})", ""]
    if sinks:
        md += ["## Where each sink works", "", "| contender | sink |", "|---|---|"]
        md += [f"| {name} | {escape(sink)} |" for name, sink in sinks]
        md.append("")
    for group in groups:
        lines, notes = group_table(group, results[group], contender_order, losses)
        md += [f"## {group}", "", f"**Time:** {GROUP_MEASURES.get(group, UNKNOWN_MEASURE)}.", ""]
        if group in GROUP_NOTES:
            md += [GROUP_NOTES[group], ""]
        md += lines + [""]
        extra = retention_findings(args.criterion_dir, args.since) if group == RETRIEVAL_GROUP else []
        for note in findings(group, results[group], reference_of(group, results[group])) + extra + notes:
            md += [note, ""]
    md += export_section(args.criterion_dir, args.since)
    with open(args.out_md, "w", encoding="utf-8") as f:
        f.write("\n".join(md))
    print(f"wrote {args.out_md}" + (f" and {args.out_svg}" if svg is not None else ""))


if __name__ == "__main__":
    main()
