'use strict';
// "Why were these slow?": the page's heatmap of every request by start time
// and latency, the ranking of the attributes that set a brushed region of it
// apart, and latency percentiles per operation. page.js calls
// mtExplain.install with its data and helpers; this file defines nothing
// else.
//
// The ranking. Each request carries attributes: its operation (the root's
// name), each root property as key=value, the name of each span under the
// root (once per request, however often it occurs), and its thread; and,
// on a page of several processes' dumps, each process the request has spans
// in (a request joined across processes has them all: its rows' attributes
// together). (A dump itself names no process or service: the process is its
// dump's label; a root property such as service=… is ranked like any
// other.) For the requests in the region (the
// selection) and all the others (the baseline), the share that has each
// attribute is counted, and attributes are ranked by the difference of the
// two shares, selection minus baseline: 1 for an attribute every selected
// request has and no other does, 0 for one as common in both, negative for
// one the selection lacks. The difference, unlike a ratio or log-odds of the
// shares, is bounded and weighs how much of the selection an attribute
// accounts for: a value held by 2 selected requests and no other would top a
// ratio, and explains nothing of a selection of 5 000. Ties go to the larger
// share of the selection.
const mtExplain = (() => {
  const CELL = 4; // a heatmap cell's side, in CSS pixels
  // The heatmap's colours, from one request in a cell to the most.
  const RAMP = [[255, 237, 160], [254, 178, 76], [240, 59, 32], [128, 0, 38]];
  const KINDS = ['operation', 'property', 'span', 'thread', 'process'];
  const [OPERATION, PROPERTY, SPAN, THREAD, PROCESS] = [0, 1, 2, 3, 4];
  const SHOWN = 40; // ranking rows shown before "show all"

  function ramp(t) {
    const at = Math.min(RAMP.length - 1.000001, Math.max(0, t) * (RAMP.length - 1));
    const k = Math.floor(at);
    const f = at - k;
    return RAMP[k].map((c, j) => Math.round(c + (RAMP[k + 1][j] - c) * f));
  }

  // Nearest-rank percentiles of sorted values, as minitrace-view's summary.
  function percentile(sorted, q) {
    const rank = Math.ceil(q * sorted.length);
    return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
  }

  // `page`: { n, meta, begin, dur, durLog, kind, view(), dpr(), fit(canvas),
  // axes(overlay, plot, xTicks, yTicks, title), timeTicks(width), fmtDur(ns),
  // escapeHtml(text), readAttributes(b), blockCount, rowCount, rowsOf(i),
  // isPart(row), processOfRow(row), processes, api, onBrush(mask, count)
  // }; see page.js. Adds
  // its test hooks to `api` (window.mtview), and returns { draw }.
  function install(page) {
    const $ = (id) => document.getElementById(id);
    const { n, meta, begin, dur, durLog, kind, fmtDur, escapeHtml } = page;
    const us = (value) => fmtDur(value * 1e3);

    // The latency axis spans every request, whatever the scatter's zoom.
    let lo = Infinity;
    let hi = -Infinity;
    for (let i = 0; i < n; i++) {
      if (durLog[i] < lo) lo = durLog[i];
      if (durLog[i] > hi) hi = durLog[i];
    }
    const pad = Math.max((hi - lo) * 0.04, 0.05);
    const yLo = lo - pad;
    const yHi = hi + pad;

    const canvas = $('heatmap');
    const overlay = $('heatmap-axes');
    const cells = document.createElement('canvas');
    let counts = null;
    // The brushed region in data units: µs since the first request, and
    // log10 of µs of latency; null when nothing is brushed.
    let brush = null;
    let dragging = null;
    let mask = null;
    let selectedCount = 0;

    const stops = RAMP.map((c, k) => `rgb(${c.join(',')}) ${k / (RAMP.length - 1) * 100}%`).join(', ');
    $('heatmap-scale').style.background = `linear-gradient(to right, ${stops})`;

    function draw() {
      const started = performance.now();
      page.fit(canvas);
      const W = canvas.width;
      const H = canvas.height;
      const side = CELL * page.dpr();
      const cols = Math.max(1, Math.floor(W / side));
      const rows = Math.max(1, Math.floor(H / side));
      if (!counts || counts.length !== cols * rows) counts = new Uint32Array(cols * rows);
      else counts.fill(0);
      const v = page.view();
      const sx = cols / (v.x1 - v.x0);
      const sy = rows / (yHi - yLo);
      let most = 0;
      for (let i = 0; i < n; i++) {
        const c = Math.floor((begin[i] - v.x0) * sx);
        if (c < 0 || c >= cols) continue;
        const r = Math.min(rows - 1, Math.max(0, Math.floor((yHi - durLog[i]) * sy)));
        const m = ++counts[r * cols + c];
        if (m > most) most = m;
      }
      const image = new ImageData(cols, rows);
      const px = image.data;
      // Log shading: a lone request shows, and so do a few among millions.
      const scale = most > 1 ? Math.log(most) : 1;
      for (let p = 0; p < cols * rows; p++) {
        if (counts[p] === 0) continue;
        const [r, g, b] = ramp(most > 1 ? Math.log(counts[p]) / scale : 1);
        px[4 * p] = r; px[4 * p + 1] = g; px[4 * p + 2] = b; px[4 * p + 3] = 255;
      }
      cells.width = cols;
      cells.height = rows;
      cells.getContext('2d').putImageData(image, 0, 0);
      const context = canvas.getContext('2d');
      context.clearRect(0, 0, W, H);
      context.imageSmoothingEnabled = false;
      context.drawImage(cells, 0, 0, W, H);
      $('heatmap-max').textContent = `1 – ${most.toLocaleString('en')}`;
      drawAxes();
      api.heatmapMs = performance.now() - started;
    }

    const yOf = (l, Hp) => (yHi - l) / (yHi - yLo) * Hp;
    const xOf = (t, Wp) => { const v = page.view(); return (t - v.x0) / (v.x1 - v.x0) * Wp; };

    function drawAxes() {
      const Wp = canvas.clientWidth;
      const Hp = canvas.clientHeight;
      const yTicks = [];
      for (let k = Math.floor(yLo); k <= yHi; k++) {
        for (const m of yHi - yLo < 2 ? [1, 2, 5] : [1]) {
          const l = k + Math.log10(m);
          if (l >= yLo && l <= yHi) yTicks.push([yOf(l, Hp), us(Math.pow(10, l))]);
        }
      }
      const { ctx, L, T } = page.axes(overlay, canvas, page.timeTicks(Wp), yTicks, 'latency');
      let box = null;
      if (dragging) {
        box = [dragging.from.x, dragging.from.y, dragging.to.x, dragging.to.y];
      } else if (brush) {
        box = [xOf(brush.t0, Wp), yOf(brush.l1, Hp), xOf(brush.t1, Wp), yOf(brush.l0, Hp)];
      }
      if (box) {
        const x0 = Math.max(0, Math.min(box[0], box[2]));
        const x1 = Math.min(Wp, Math.max(box[0], box[2]));
        const y0 = Math.max(0, Math.min(box[1], box[3]));
        const y1 = Math.min(Hp, Math.max(box[1], box[3]));
        if (x1 > x0 && y1 > y0) {
          ctx.fillStyle = 'rgba(23, 92, 211, 0.12)';
          ctx.fillRect(L + x0, T + y0, x1 - x0, y1 - y0);
          ctx.strokeStyle = '#175cd3'; ctx.lineWidth = 1.5;
          ctx.strokeRect(L + x0, T + y0, x1 - x0, y1 - y0);
        }
      }
    }

    // Brushing: drag a rectangle; a click without a drag clears it.
    function local(event) {
      const rect = canvas.getBoundingClientRect();
      return {
        x: Math.min(rect.width, Math.max(0, event.clientX - rect.left)),
        y: Math.min(rect.height, Math.max(0, event.clientY - rect.top)),
      };
    }
    canvas.addEventListener('mousedown', (event) => {
      event.preventDefault();
      dragging = { from: local(event), to: local(event) };
    });
    window.addEventListener('mousemove', (event) => {
      if (!dragging) return;
      dragging.to = local(event);
      drawAxes();
    });
    window.addEventListener('mouseup', (event) => {
      if (!dragging) return;
      const { from } = dragging;
      const to = local(event);
      dragging = null;
      if (Math.abs(to.x - from.x) < 3 || Math.abs(to.y - from.y) < 3) {
        setBrush(null);
        return;
      }
      const Wp = canvas.clientWidth;
      const Hp = canvas.clientHeight;
      const v = page.view();
      const t = (x) => v.x0 + x / Wp * (v.x1 - v.x0);
      const l = (y) => yHi - y / Hp * (yHi - yLo);
      setBrush({ t0: t(Math.min(from.x, to.x)), t1: t(Math.max(from.x, to.x)),
        l0: l(Math.max(from.y, to.y)), l1: l(Math.min(from.y, to.y)) });
    });

    // The selection: the requests whose start and latency fall in the brush.
    function setBrush(region) {
      brush = region;
      drawAxes();
      mask = null;
      selectedCount = 0;
      if (brush) {
        mask = new Uint8Array(n);
        for (let i = 0; i < n; i++) {
          if (begin[i] >= brush.t0 && begin[i] <= brush.t1 && durLog[i] >= brush.l0 && durLog[i] <= brush.l1) {
            mask[i] = 1;
            selectedCount++;
          }
        }
      }
      drawOperations();
      page.onBrush(mask, selectedCount);
      return explain(mask, selectedCount);
    }

    // Every request's attributes, numbered: request i has the attribute
    // numbers ids[starts[i]] .. ids[starts[i + 1]]. Read by row (a trace)
    // and, when rows were joined into requests, then gathered by request.
    // Read once from the
    // dump's blocks (page.js's readAttributes(b)), in the background a
    // moment after the page is ready, or at once on the first brush.
    let index = null;
    let indexed = 0; // blocks read
    let onProgress = () => {};
    function buildIndex() {
      if (index) return index;
      index = (async () => {
        // label → number, a map per kind; properties by key, then value.
        const operations = new Map();
        const properties = new Map();
        const spans = new Map();
        const threads = new Map();
        const processes = new Map();
        const rankProcesses = page.processes.length > 1;
        const kinds = [];
        const labels = [];
        let seen = new Int32Array(1024); // the last owner that had each number
        let starts = new Uint32Array(page.rowCount + 1);
        let ids = new Uint32Array(Math.max(1024, n * 4));
        let used = 0;
        // The number of a new attribute.
        const fresh = (map, key, attributeKind, label) => {
          const id = labels.length;
          map.set(key, id);
          kinds.push(attributeKind);
          labels.push(label);
          if (id === seen.length) {
            const grown = new Int32Array(seen.length * 2);
            grown.set(seen);
            seen = grown;
          }
          return id;
        };
        // Adds attribute `id` to `owner` (row + 1 when reading rows, its
        // negative when gathering requests), once.
        const add = (id, owner) => {
          if (seen[id] === owner) return;
          seen[id] = owner;
          if (used === ids.length) {
            const grown = new Uint32Array(ids.length * 2);
            grown.set(ids);
            ids = grown;
          }
          ids[used++] = id;
        };
        let i = 0;
        for (let b = 0; b < page.blockCount; b++) {
          for (const request of await page.readAttributes(b)) {
            starts[i] = used;
            const name = request.name;
            const owner = i + 1;
            // A part's root is a span of the request, whose operation is its entry's.
            if (!page.isPart(i)) add(operations.get(name) ?? fresh(operations, name, OPERATION, name), owner);
            else if (request.thread !== 0) add(spans.get(name) ?? fresh(spans, name, SPAN, name), owner);
            for (const [key, value] of request.properties) {
              let values = properties.get(key);
              if (values === undefined) properties.set(key, values = new Map());
              add(values.get(value) ?? fresh(values, value, PROPERTY, `${key}=${value}`), owner);
            }
            // The spans under the root: the root, last when held, is the operation.
            const names = request.spanNames;
            for (let k = names.length - (request.thread !== 0 ? 2 : 1); k >= 0; k--) {
              add(spans.get(names[k]) ?? fresh(spans, names[k], SPAN, names[k]), owner);
            }
            // Threads are a process's own: with several, named `process thread`.
            const process = rankProcesses ? page.processOfRow(i) : '';
            const thread = rankProcesses ? `${process} ${request.thread}` : request.thread;
            const threadLabel = `${rankProcesses ? `${process} ` : ''}${request.thread === 0 ? '(root not held)' : request.thread}`;
            add(threads.get(thread) ?? fresh(threads, thread, THREAD, threadLabel), owner);
            if (rankProcesses) add(processes.get(process) ?? fresh(processes, process, PROCESS, process), owner);
            i++;
          }
          indexed = b + 1;
          onProgress();
        }
        starts[page.rowCount] = used;
        if (page.rowCount !== n) {
          const rowStarts = starts;
          const rowIds = ids;
          starts = new Uint32Array(n + 1);
          ids = new Uint32Array(Math.max(1024, used));
          used = 0;
          for (let r = 0; r < n; r++) {
            starts[r] = used;
            for (const row of page.rowsOf(r)) {
              for (let k = rowStarts[row]; k < rowStarts[row + 1]; k++) add(rowIds[k], -(r + 1));
            }
          }
          starts[n] = used;
        }
        const totals = new Uint32Array(labels.length);
        for (let k = 0; k < used; k++) totals[ids[k]]++;
        return { kinds, labels, starts, ids: ids.subarray(0, used), totals };
      })();
      return index;
    }
    // Its failure (a block the browser cannot read) shows on the next brush.
    setTimeout(() => buildIndex().catch(() => {}), 1000);

    const status = $('explain-status');
    const table = $('explain-table');
    const pct = (share) => `${(share * 100).toFixed(share > 0 && share < 0.001 ? 3 : 1)}%`;
    let ranked = [];

    async function explain(selection, count) {
      api.explained = null;
      table.hidden = true;
      if (!selection) {
        status.textContent = 'Drag over a region of the heatmap to rank what sets its requests apart.';
        return null;
      }
      if (count === 0) {
        status.textContent = 'No request in the region.';
        api.explained = { selected: 0, rows: [] };
        return api.explained;
      }
      const started = performance.now();
      onProgress = () => {
        status.textContent = `Reading every request's attributes: block ${indexed} of ${page.blockCount}…`;
      };
      onProgress();
      let attributes;
      try {
        attributes = await buildIndex();
      } catch (error) {
        status.textContent = `The requests' attributes could not be read: ${error.message}`;
        return null;
      } finally {
        onProgress = () => {};
      }
      if (mask !== selection) return null; // brushed again meanwhile
      const { kinds, labels, starts, ids, totals } = attributes;
      const inSelection = new Uint32Array(labels.length);
      for (let i = 0; i < n; i++) {
        if (!selection[i]) continue;
        for (let k = starts[i]; k < starts[i + 1]; k++) inSelection[ids[k]]++;
      }
      const others = n - count;
      ranked = labels.map((label, id) => {
        const selectionShare = inSelection[id] / count;
        const otherShare = others > 0 ? (totals[id] - inSelection[id]) / others : 0;
        return { kind: KINDS[kinds[id]], label, selected: inSelection[id], others: totals[id] - inSelection[id],
          selectionShare, otherShare, difference: selectionShare - otherShare };
      });
      ranked.sort((a, b) => b.difference - a.difference || b.selectionShare - a.selectionShare ||
        (a.label < b.label ? -1 : a.label > b.label ? 1 : 0));
      status.textContent = `${count.toLocaleString('en')} requests selected of ${n.toLocaleString('en')}: ` +
        `their ${ranked.length.toLocaleString('en')} attributes, ranked by share in the selection minus ` +
        `share in the ${others.toLocaleString('en')} others (${Math.round(performance.now() - started)} ms).`;
      renderRanking(SHOWN);
      api.explained = { selected: count, rows: ranked.slice(0, SHOWN) };
      return api.explained;
    }

    function renderRanking(limit) {
      const bar = (share, rest) => `<i class="share${rest ? ' rest' : ''}" style="width:${Math.round(share * 40)}px"></i>`;
      const rows = ranked.slice(0, limit).map((row) =>
        `<tr><td class="kind">${row.kind}</td><td class="label">${escapeHtml(row.label)}</td>` +
        `<td title="${row.selected.toLocaleString('en')} requests">${bar(row.selectionShare, false)}${pct(row.selectionShare)}</td>` +
        `<td title="${row.others.toLocaleString('en')} requests">${bar(row.otherShare, true)}${pct(row.otherShare)}</td>` +
        `<td>${row.difference >= 0 ? '+' : '−'}${(Math.abs(row.difference) * 100).toFixed(1)}</td></tr>`);
      const more = ranked.length > limit
        ? `<tr><td colspan="5" class="kind"><button id="explain-all">show all ${ranked.length.toLocaleString('en')}</button></td></tr>`
        : '';
      table.innerHTML = '<thead><tr><th class="kind">kind</th><th class="label">attribute</th>' +
        '<th>selection</th><th>others</th><th title="percentage points">difference</th></tr></thead>' +
        `<tbody>${rows.join('')}${more}</tbody>`;
      table.hidden = false;
      const all = $('explain-all');
      if (all) all.addEventListener('click', () => renderRanking(ranked.length));
    }

    // Latency by operation (the root's name, as the legend groups them):
    // every request's, and the selection's when there is one.
    const byKind = meta.kinds.map(() => []);
    for (let i = 0; i < n; i++) byKind[kind[i]].push(i);
    const sortedOf = (indexes) => Float32Array.from(indexes, (i) => dur[i]).sort();
    const everyOne = byKind.map(sortedOf);
    const order = meta.kinds.map((_, k) => k).filter((k) => everyOne[k].length > 0)
      .sort((a, b) => everyOne[b].length - everyOne[a].length);
    const cellsOf = (sorted) => (sorted.length === 0 ? ['0', '', '', '', ''] : [sorted.length.toLocaleString('en'),
      us(percentile(sorted, 0.5)), us(percentile(sorted, 0.9)), us(percentile(sorted, 0.99)), us(sorted[sorted.length - 1])]);
    function drawOperations() {
      $('operations-hint').textContent = `every request${mask ? ', and those in the selected region,' : ''} ` +
        "by its root's name (nearest-rank percentiles)";
      const heads = ['requests', 'p50', 'p90', 'p99', 'max'];
      let head = `<th class="label">operation</th>${heads.map((h) => `<th>${h}</th>`).join('')}`;
      if (mask) head += heads.map((h) => `<th class="selected">selected: ${h}</th>`).join('');
      const rows = order.map((k) => {
        let cellsHtml = cellsOf(everyOne[k]).map((c) => `<td>${c}</td>`).join('');
        if (mask) cellsHtml += cellsOf(sortedOf(byKind[k].filter((i) => mask[i]))).map((c) => `<td class="selected">${c}</td>`).join('');
        return `<tr><td class="label">${escapeHtml(meta.kinds[k].name)}</td>${cellsHtml}</tr>`;
      });
      $('operations').innerHTML = `<thead><tr>${head}</tr></thead><tbody>${rows.join('')}</tbody>`;
    }
    drawOperations();

    // For tests and tools, on window.mtview:
    //   brush({ t0, t1, d0, d1 }) brushes a region in data units (t0, t1: µs
    //     since the first request; d0, d1: latency in µs), or null clears it;
    //     a promise of what `explained` becomes;
    //   explained: { selected, rows } of the last ranking (rows: its first 40,
    //     each { kind, label, selected, others, selectionShare, otherShare,
    //     difference }), null while one is under way or nothing is brushed;
    //   heatmapPoint(t, d): where on the screen (client pixels) a request
    //     starting at t µs with latency d µs is drawn;
    //   heatmapMs: how long the last heatmap took to draw.
    const api = Object.assign(page.api, {
      explained: null,
      brush: (region) => setBrush(region && { t0: region.t0, t1: region.t1,
        l0: Math.log10(Math.max(region.d0, 1e-3)), l1: Math.log10(Math.max(region.d1, 1e-3)) }),
      heatmapPoint: (t, d) => {
        const rect = canvas.getBoundingClientRect();
        return { x: rect.left + xOf(t, rect.width), y: rect.top + yOf(Math.log10(Math.max(d, 1e-3)), rect.height) };
      },
    });
    return { draw };
  }

  return { install };
})();
