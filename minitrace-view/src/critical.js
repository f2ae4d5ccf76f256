'use strict';
// The critical path of a brushed selection, by stage, beside the baseline's:
// where the selected requests' latency went that the others' did not.
// page.js installs it with its data and helpers; explain.js calls update()
// with each brush. This file defines nothing else.
//
// A request's critical path. Its latency is split among its spans: walking
// back from the root's end, the time belongs to the child that finished
// last before the point reached (walked into the same way), and where no
// child runs it is the span's own time. Children are clipped to their
// parent's interval, so a part from a process with a skewed clock never
// counts more than its parent lasted; a span visited twice (a forged dump
// can make its parents a cycle) counts once. Every nanosecond of the root's
// duration goes to exactly one span, so a request's stages sum to its
// latency. A stage is a span name (with several processes, the name and its
// process): the time on the path of all its spans in the request.
//
// The selection and its baseline. Decoding every span of a million
// requests would take tens of seconds, so at most SIDE requests of each
// side are read: every selected one (every k-th past SIDE), and as the
// baseline the other requests of the blocks that hold the most selected
// ones, from the same stretches of time. Only those requests' traces are
// decoded; the rest of each block is read past. The status line says how
// many of each it read.
const mtCritical = (() => {
  const SIDE = 20000; // requests read at most of each side
  const SHOWN = 12; // stages shown, by how much more time the selection spends in them

  // Adds request `spans`' critical path, from the span at `root`, to
  // `into` (a Map of stage → ns); `labelOf(span)` names a span's stage.
  function addPath(spans, root, labelOf, into) {
    const base = spans[root].beginNs;
    const at = (ns) => Number(ns - base);
    const children = spans.map(() => []);
    spans.forEach((span, k) => {
      if (k !== root && span.parent >= 0 && span.parent !== k) children[span.parent].push(k);
    });
    const visited = new Uint8Array(spans.length);
    const add = (k, ns) => {
      if (ns <= 0) return;
      const label = labelOf(spans[k]);
      into.set(label, (into.get(label) || 0) + ns);
    };
    // Work items: a span, clipped to [lo, hi] of its parent's path.
    const work = [[root, 0, at(spans[root].beginNs + spans[root].durationNs)]];
    while (work.length > 0) {
      const [k, lo, hi] = work.pop();
      if (visited[k]) continue;
      visited[k] = 1;
      const ends = children[k].map((c) => [c, at(spans[c].beginNs), at(spans[c].beginNs + spans[c].durationNs)])
        .sort((a, b) => b[2] - a[2]);
      let cursor = hi;
      for (const [c, begin, end] of ends) {
        if (visited[c]) continue;
        const from = Math.max(begin, lo);
        const to = Math.min(end, cursor);
        if (to <= from) continue; // after the point reached, or outside its parent
        add(k, cursor - to);
        work.push([c, from, to]);
        cursor = from;
      }
      add(k, cursor - lo);
    }
  }

  // `page`: { n, meta, blockCount, blockOf, readTraces(b, wanted), rowsOf,
  // processOfRow, processes, fmtDur, escapeHtml, api }; see page.js.
  // Returns { update(mask, count) }.
  function install(page) {
    const $ = (id) => document.getElementById(id);
    const { n, meta, fmtDur, escapeHtml, api } = page;
    const status = $('critical-status');
    const table = $('critical-table');
    const several = page.processes.length > 1;
    const labelOf = (span) => (several ? `${span.name} (${span.process})` : span.name);
    let generation = 0;
    // On window.mtview: criticalPath, null while one is under way or nothing
    // is brushed, else { selection, baseline: { requests, meanLatencyNs },
    // blocks (read), stages: [{ stage, selectionNs, baselineNs }] (mean ns
    // per request on the path, ranked by the difference) }.
    api.criticalPath = null;

    // The requests to read for `mask`: the selected ones (every k-th past
    // SIDE), and as many others from the blocks that hold the most of them.
    function choose(mask) {
      const entryBlock = new Uint32Array(n);
      const selectedIn = new Uint32Array(page.blockCount);
      const selected = [];
      for (let i = 0; i < n; i++) {
        entryBlock[i] = page.blockOf(page.rowsOf(i)[0]);
        if (mask[i]) selected.push(i);
      }
      const step = Math.ceil(selected.length / SIDE);
      const chosen = step > 1 ? selected.filter((_, k) => k % step === 0) : selected;
      for (const i of chosen) selectedIn[entryBlock[i]]++;
      const rank = new Int32Array(page.blockCount).fill(-1);
      [...selectedIn.keys()].filter((b) => selectedIn[b] > 0)
        .sort((a, b) => selectedIn[b] - selectedIn[a] || a - b).forEach((b, k) => { rank[b] = k; });
      const others = [];
      for (let i = 0; i < n; i++) if (!mask[i] && rank[entryBlock[i]] >= 0) others.push(i);
      others.sort((a, b) => rank[entryBlock[a]] - rank[entryBlock[b]] || a - b);
      return { chosen, step, others: others.slice(0, SIDE) };
    }

    // Each side's stages (Map of stage → total ns), requests and latency.
    async function measure(mask, mine) {
      const { chosen, step, others } = choose(mask);
      const wanted = [...chosen, ...others];
      const rowsByBlock = new Map();
      for (const i of wanted) {
        for (const row of page.rowsOf(i)) {
          const b = page.blockOf(row);
          if (!rowsByBlock.has(b)) rowsByBlock.set(b, new Set());
          rowsByBlock.get(b).add(row - meta.blockStarts[b]);
        }
      }
      // Decoded a block at a time, keeping only the rows wanted.
      const spansOfRow = new Map();
      let done = 0;
      for (const [b, places] of rowsByBlock) {
        const traces = await page.readTraces(b, (t) => places.has(t));
        if (mine !== generation) return null;
        const first = meta.blockStarts[b];
        const process = page.processOfRow(first);
        for (const t of places) {
          const trace = traces[t];
          spansOfRow.set(first + t, { trace, spans: trace.spans.map((span) => ({ ...span, process })) });
        }
        done++;
        status.textContent = `Reading the spans of the selection and its neighbours: block ${done} of ${rowsByBlock.size}…`;
      }
      const sides = [0, 1].map(() => ({ stages: new Map(), requests: 0, latencyNs: 0 }));
      for (const i of wanted) {
        const rows = page.rowsOf(i);
        const entry = spansOfRow.get(rows[0]);
        if (entry.trace.root < 0) continue; // no root held: no path to walk
        let spans = entry.spans;
        if (rows.length > 1) {
          spans = rows.flatMap((row) => spansOfRow.get(row).spans);
          const firstAt = new Map();
          spans.forEach((span, at) => { if (!firstAt.has(span.spanId)) firstAt.set(span.spanId, at); });
          spans = spans.map((span) => ({ ...span, parent: firstAt.get(span.parentId) ?? -1 }));
        }
        const side = sides[mask[i] ? 0 : 1];
        addPath(spans, entry.trace.root, labelOf, side.stages);
        side.requests++;
        side.latencyNs += Number(entry.spans[entry.trace.root].durationNs);
      }
      return { sides, blocks: rowsByBlock.size, step };
    }

    async function update(mask, count) {
      const mine = ++generation;
      api.criticalPath = null;
      table.hidden = true;
      if (!mask || count === 0) {
        status.textContent = 'Brush a region of the heatmap to see where its requests\u2019 time went.';
        return;
      }
      let measured;
      try {
        measured = await measure(mask, mine);
      } catch (error) {
        if (mine === generation) status.textContent = `The spans could not be read: ${error.message}`;
        return;
      }
      if (!measured || mine !== generation) return;
      const [selection, baseline] = measured.sides;
      const mean = (side, label) => (side.requests > 0 ? (side.stages.get(label) || 0) / side.requests : 0);
      const labels = new Set([...selection.stages.keys(), ...baseline.stages.keys()]);
      const stages = [...labels].map((stage) => ({
        stage, selectionNs: mean(selection, stage), baselineNs: mean(baseline, stage),
      })).sort((a, b) => (b.selectionNs - b.baselineNs) - (a.selectionNs - a.baselineNs) ||
        (a.stage < b.stage ? -1 : a.stage > b.stage ? 1 : 0));
      const summary = (side) => ({ requests: side.requests, meanLatencyNs: side.requests > 0 ? side.latencyNs / side.requests : 0 });
      api.criticalPath = { selection: summary(selection), baseline: summary(baseline), blocks: measured.blocks, stages };
      status.textContent = `Mean time per request on the critical path, by stage: ${selection.requests.toLocaleString('en')} ` +
        `selected${measured.step > 1 ? ` (every ${measured.step.toLocaleString('en')}th)` : ''} and ` +
        `${baseline.requests.toLocaleString('en')} other requests, from ${measured.blocks} of ` +
        `${page.blockCount} blocks of the dump.`;
      const share = (ns, side) => (side.requests > 0 && side.latencyNs > 0 ? ns / (side.latencyNs / side.requests) : 0);
      const pct = (x) => `${(x * 100).toFixed(1)}%`;
      const cell = (ns, side) => `<td>${fmtDur(ns)} <span class="hint">${pct(share(ns, side))}</span></td>`;
      const rows = stages.slice(0, SHOWN).map((row) => {
        const difference = row.selectionNs - row.baselineNs;
        return `<tr><td class="label">${escapeHtml(row.stage)}</td>${cell(row.selectionNs, selection)}` +
          `${cell(row.baselineNs, baseline)}<td>${difference >= 0 ? '+' : '−'}${fmtDur(Math.abs(difference))}</td></tr>`;
      });
      const total = (side) => `<td>${fmtDur(summary(side).meanLatencyNs)}</td>`;
      table.innerHTML = '<thead><tr><th class="label">stage</th><th>selection</th><th>others</th><th>difference</th></tr></thead>' +
        `<tbody>${rows.join('')}<tr class="total"><td class="label">latency (the whole path)</td>` +
        `${total(selection)}${total(baseline)}<td></td></tr></tbody>`;
      table.hidden = false;
    }

    update(null, 0);
    return { update };
  }

  return { install, addPath };
})();
