'use strict';
// The page's only script: it reads the data elements written by
// minitrace-view and draws on <canvas> from typed arrays (see page.rs for why).
(() => {
  const $ = (id) => document.getElementById(id);
  const meta = JSON.parse($('meta').textContent);
  const api = { ready: false };
  window.mtview = api;

  const bytesOf = (id) => mtEmbed.bytes($(id).textContent);

  const { fmtDur, fmtSeconds, niceTicks, escapeHtml } = mtFormat;

  const n = meta.count;
  const s = meta.summary;
  $('stats').innerHTML = n === 0 ? '<b>0</b> requests' :
    `<b>${n.toLocaleString('en')}</b> requests · <b>${meta.spans.toLocaleString('en')}</b> spans · ` +
    `p50 <b>${fmtDur(s.p50)}</b> · p90 <b>${fmtDur(s.p90)}</b> · p99 <b>${fmtDur(s.p99)}</b> · ` +
    `p99.9 <b>${fmtDur(s.p999)}</b> · max <b>${fmtDur(s.max)}</b>`;

  if (n === 0) {
    $('main').innerHTML = '<div class="empty" id="empty-state">This dump holds no requests: the recorder ' +
      'had recorded none when it was dumped.</div>';
    api.ready = true;
    return;
  }

  const begin = new Float64Array(bytesOf('d-begin').buffer); // µs since the first request
  const dur = new Float32Array(bytesOf('d-duration').buffer); // µs
  const kind = bytesOf('d-kind');
  // The dumps' traces, a row each in block order, make the requests: with
  // several processes' dumps, the traces of one trace id are one request,
  // its entry's row (the trace whose root began first) and its parts, the
  // other processes' rows. d-parts lists (row, request) of every part;
  // request i's entry is the i-th row that is no part.
  const rowCount = meta.rows;
  const processes = meta.processes;
  const parts = new Uint32Array(bytesOf('d-parts').buffer);
  const entryRow = new Uint32Array(n);
  const partsOf = new Map();
  const isPart = new Uint8Array(rowCount);
  {
    for (let k = 0; k < parts.length; k += 2) {
      isPart[parts[k]] = 1;
      if (!partsOf.has(parts[k + 1])) partsOf.set(parts[k + 1], []);
      partsOf.get(parts[k + 1]).push(parts[k]);
    }
    for (let row = 0, i = 0; row < rowCount; row++) if (!isPart[row]) entryRow[i++] = row;
  }
  // Request i's rows, its entry's first.
  const rowsOf = (i) => [entryRow[i], ...(partsOf.get(i) || [])];
  const durLog = new Float32Array(n);
  let tMax = 0;
  let dMin = Infinity;
  let dMax = 0;
  for (let i = 0; i < n; i++) {
    durLog[i] = Math.log10(Math.max(dur[i], 1e-3));
    if (begin[i] > tMax) tMax = begin[i];
    if (dur[i] > 0 && dur[i] < dMin) dMin = dur[i];
    if (dur[i] > dMax) dMax = dur[i];
  }
  if (!isFinite(dMin)) dMin = 1e-3;
  const channel = (at) => Uint8Array.from(meta.kinds, (k) => parseInt(k.color.slice(at, at + 2), 16));
  const [kindR, kindG, kindB] = [channel(1), channel(3), channel(5)];
  $('legend').innerHTML = meta.kinds.map((k) =>
    `<span><i style="background:${k.color}"></i>${escapeHtml(k.name)} (${k.count.toLocaleString('en')})</span>`).join('');


  // The view: x in µs since the first request, y in µs or log10(µs).
  let logY = $('log-y').checked;
  let view;
  function fullView() {
    const pad = Math.max(tMax * 0.01, 1);
    const yr = logY ? [Math.log10(dMin), Math.log10(dMax)] : [0, dMax];
    const ypad = Math.max((yr[1] - yr[0]) * 0.05, logY ? 0.1 : dMax * 0.05 || 1);
    return { x0: -pad, x1: tMax + pad, y0: logY ? yr[0] - ypad : 0, y1: yr[1] + ypad };
  }
  view = fullView();

  const dpr = () => window.devicePixelRatio || 1;
  function fit(canvas) {
    const w = Math.max(1, Math.round(canvas.clientWidth * dpr()));
    const h = Math.max(1, Math.round(canvas.clientHeight * dpr()));
    if (canvas.width !== w || canvas.height !== h) { canvas.width = w; canvas.height = h; }
  }

  // The scatter: every point added into per-pixel sums, then one putImageData.
  const scatter = $('scatter');
  const ALPHA = 0.5; // one point's opacity; k points on a pixel: 1 - (1 - ALPHA)^k
  let buffers = null;
  function drawScatter() {
    fit(scatter);
    const W = scatter.width;
    const H = scatter.height;
    if (!buffers || buffers.size !== W * H) {
      buffers = { size: W * H, count: new Float32Array(W * H), r: new Float32Array(W * H),
        g: new Float32Array(W * H), b: new Float32Array(W * H) };
    } else {
      buffers.count.fill(0); buffers.r.fill(0); buffers.g.fill(0); buffers.b.fill(0);
    }
    const { count, r, g, b } = buffers;
    const sx = W / (view.x1 - view.x0);
    const sy = H / (view.y1 - view.y0);
    const ys = logY ? durLog : dur;
    const size = Math.max(2, Math.round(1.5 * dpr()));
    for (let i = 0; i < n; i++) {
      const x = Math.floor((begin[i] - view.x0) * sx);
      const y = Math.floor((view.y1 - ys[i]) * sy);
      if (x < 0 || x >= W || y < 0 || y >= H) continue;
      const k = kind[i];
      const cr = kindR[k];
      const cg = kindG[k];
      const cb = kindB[k];
      for (let dy = 0; dy < size && y + dy < H; dy++) {
        for (let dx = 0; dx < size && x + dx < W; dx++) {
          const p = (y + dy) * W + x + dx;
          count[p]++; r[p] += cr; g[p] += cg; b[p] += cb;
        }
      }
    }
    const image = new ImageData(W, H);
    const px = image.data;
    const keep = Math.log(1 - ALPHA);
    for (let p = 0; p < W * H; p++) {
      const c = count[p];
      if (c === 0) continue;
      px[4 * p] = r[p] / c; px[4 * p + 1] = g[p] / c; px[4 * p + 2] = b[p] / c;
      px[4 * p + 3] = 255 * (1 - Math.exp(c * keep));
    }
    scatter.getContext('2d').putImageData(image, 0, 0);
  }

  // Axes on the overlay canvas around a plot canvas, in CSS pixels.
  function axes(overlay, plot, xTicks, yTicks, yTitle) {
    fit(overlay);
    const ctx = overlay.getContext('2d');
    ctx.setTransform(dpr(), 0, 0, dpr(), 0, 0);
    ctx.clearRect(0, 0, overlay.clientWidth, overlay.clientHeight);
    const L = plot.offsetLeft;
    const T = plot.offsetTop;
    const Wp = plot.clientWidth;
    const Hp = plot.clientHeight;
    ctx.strokeStyle = '#d0d5dd'; ctx.fillStyle = '#667085'; ctx.font = '11px system-ui, sans-serif';
    ctx.strokeRect(L - 0.5, T - 0.5, Wp + 1, Hp + 1);
    ctx.textAlign = 'center'; ctx.textBaseline = 'top';
    for (const [x, label] of xTicks) {
      if (x < 0 || x > Wp) continue;
      ctx.beginPath(); ctx.moveTo(L + x, T + Hp); ctx.lineTo(L + x, T + Hp + 4); ctx.stroke();
      ctx.fillText(label, L + x, T + Hp + 6);
    }
    ctx.textAlign = 'right'; ctx.textBaseline = 'middle';
    for (const [y, label] of yTicks) {
      if (y < 0 || y > Hp) continue;
      ctx.beginPath(); ctx.moveTo(L - 4, T + y); ctx.lineTo(L, T + y); ctx.stroke();
      ctx.fillText(label, L - 6, T + y);
    }
    ctx.save(); ctx.translate(12, T + Hp / 2); ctx.rotate(-Math.PI / 2);
    ctx.textAlign = 'center'; ctx.fillText(yTitle, 0, 0); ctx.restore();
    return { ctx, L, T, Wp, Hp };
  }

  function timeTicks(width) {
    const { ticks, step } = niceTicks(view.x0, view.x1, Math.max(2, width / 110));
    return ticks.map((t) => [(t - view.x0) / (view.x1 - view.x0) * width, fmtSeconds(t, step)]);
  }

  function drawScatterAxes() {
    const Wp = scatter.clientWidth;
    const Hp = scatter.clientHeight;
    const yPos = (v) => (view.y1 - v) / (view.y1 - view.y0) * Hp;
    let yTicks;
    if (logY && view.y1 - view.y0 > 1.5) {
      yTicks = [];
      for (let k = Math.ceil(view.y0); k <= view.y1; k++) yTicks.push([yPos(k), fmtDur(Math.pow(10, k) * 1e3)]);
    } else {
      const lo = logY ? Math.pow(10, view.y0) : view.y0;
      const hi = logY ? Math.pow(10, view.y1) : view.y1;
      const { ticks } = niceTicks(lo, hi, 6);
      yTicks = ticks.filter((v) => v > 0 || !logY).map((v) => [yPos(logY ? Math.log10(v) : v), fmtDur(v * 1e3)]);
    }
    const { ctx, L, T } = axes($('scatter-axes'), scatter, timeTicks(Wp), yTicks, 'duration');
    if (selected !== null) {
      const x = (begin[selected] - view.x0) / (view.x1 - view.x0) * Wp;
      const y = yPos(logY ? durLog[selected] : dur[selected]);
      if (x >= 0 && x <= Wp && y >= 0 && y <= Hp) {
        ctx.strokeStyle = '#d92d20'; ctx.lineWidth = 2;
        ctx.beginPath(); ctx.arc(L + x, T + y, 7, 0, 2 * Math.PI); ctx.stroke();
      }
    }
  }

  // Requests in flight: begins and ends sorted once, swept per redraw.
  const starts = Float64Array.from(begin).sort();
  const ends = new Float64Array(n);
  for (let i = 0; i < n; i++) ends[i] = begin[i] + dur[i];
  ends.sort();
  function lowerBound(sorted, value) {
    let lo = 0;
    let hi = sorted.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (sorted[mid] < value) lo = mid + 1; else hi = mid; }
    return lo;
  }
  const inflight = $('inflight');
  function drawInflight() {
    fit(inflight);
    const W = inflight.width;
    const H = inflight.height;
    const column = (view.x1 - view.x0) / W;
    let i = lowerBound(starts, view.x0);
    let j = lowerBound(ends, view.x0);
    let current = i - j;
    const least = new Float64Array(W);
    const most = new Float64Array(W);
    let top = 1;
    for (let c = 0; c < W; c++) {
      const until = view.x0 + (c + 1) * column;
      let lo = current;
      let hi = current;
      for (;;) {
        const s = i < n ? starts[i] : Infinity;
        const e = j < n ? ends[j] : Infinity;
        if (Math.min(s, e) >= until) break;
        if (e <= s) { current--; j++; if (current < lo) lo = current; } else { current++; i++; if (current > hi) hi = current; }
      }
      least[c] = lo; most[c] = hi;
      if (hi > top) top = hi;
    }
    top *= 1.1;
    const ctx = inflight.getContext('2d');
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, W, H);
    for (let c = 0; c < W; c++) {
      const yMost = H - most[c] / top * H;
      const yLeast = H - least[c] / top * H;
      ctx.fillStyle = '#b2ccff'; ctx.fillRect(c, yMost, 1, H - yMost);
      ctx.fillStyle = '#2e5aac'; ctx.fillRect(c, yLeast, 1, H - yLeast);
    }
    const { ticks } = niceTicks(0, top, 3);
    const Hp = inflight.clientHeight;
    axes($('inflight-axes'), inflight, timeTicks(inflight.clientWidth),
      ticks.map((v) => [Hp - v / top * Hp, String(v)]), 'in flight');
  }

  // The per-stage view: a raster made by minitrace-view, shown as is.
  const stream = $('stream');
  stream.width = meta.stream.width;
  stream.height = meta.stream.height;
  stream.getContext('2d').putImageData(
    new ImageData(new Uint8ClampedArray(bytesOf('d-stream').buffer), meta.stream.width, meta.stream.height), 0, 0);
  $('stage-legend').innerHTML = meta.stages.map((st) =>
    `<span><i style="background:${st.color}"></i>${escapeHtml(st.name)}</span>`).join('');
  function drawStreamAxes() {
    const Wp = stream.clientWidth;
    const Hp = stream.clientHeight;
    const { logMin, logMax } = meta.stream;
    const xTicks = [];
    for (let k = Math.ceil(logMin); k <= logMax; k++) xTicks.push([(k - logMin) / (logMax - logMin) * Wp, fmtDur(Math.pow(10, k))]);
    const yTicks = [[0, 'first'], [Hp, 'last']];
    const { ctx, L, T } = axes($('stream-axes'), stream, xTicks, yTicks, 'requests by start');
    if (selected !== null) {
      let rank = 0;
      const at = begin[selected];
      for (let i = 0; i < n; i++) if (begin[i] < at) rank++;
      const y = T + rank / n * Hp;
      ctx.strokeStyle = '#d92d20'; ctx.lineWidth = 1;
      ctx.beginPath(); ctx.moveTo(L, y); ctx.lineTo(L + Wp, y); ctx.stroke();
    }
  }

  let pending = false;
  function redraw() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; drawAll(); });
  }
  function drawAll() {
    drawScatter(); drawScatterAxes(); drawInflight(); drawStreamAxes(); explainer.draw();
  }

  // Zoom, pan, select.
  function pointer(event) {
    const rect = scatter.getBoundingClientRect();
    return { x: event.clientX - rect.left, y: event.clientY - rect.top, w: rect.width, h: rect.height };
  }
  scatter.addEventListener('wheel', (event) => {
    event.preventDefault();
    const p = pointer(event);
    const factor = Math.exp(Math.sign(event.deltaY) * Math.min(Math.abs(event.deltaY), 200) * 0.002);
    if (!event.altKey) {
      const at = view.x0 + p.x / p.w * (view.x1 - view.x0);
      view.x0 = at - (at - view.x0) * factor; view.x1 = at + (view.x1 - at) * factor;
    }
    if (!event.shiftKey) {
      const at = view.y1 - p.y / p.h * (view.y1 - view.y0);
      view.y0 = at - (at - view.y0) * factor; view.y1 = at + (view.y1 - at) * factor;
    }
    redraw();
  }, { passive: false });
  let drag = null;
  scatter.addEventListener('mousedown', (event) => { drag = { start: pointer(event), view: { ...view }, moved: false }; });
  window.addEventListener('mousemove', (event) => {
    if (!drag) return;
    const p = pointer(event);
    const dx = p.x - drag.start.x;
    const dy = p.y - drag.start.y;
    if (!drag.moved && Math.hypot(dx, dy) < 4) return;
    drag.moved = true;
    const v = drag.view;
    const tx = dx / p.w * (v.x1 - v.x0);
    const ty = dy / p.h * (v.y1 - v.y0);
    view = { x0: v.x0 - tx, x1: v.x1 - tx, y0: v.y0 + ty, y1: v.y1 + ty };
    redraw();
  });
  window.addEventListener('mouseup', (event) => {
    if (drag && !drag.moved) selectNear(pointer(event));
    drag = null;
  });
  scatter.addEventListener('dblclick', () => { view = fullView(); redraw(); });
  $('reset').addEventListener('click', () => { view = fullView(); redraw(); });
  $('log-y').addEventListener('change', () => { logY = $('log-y').checked; view = fullView(); redraw(); });
  window.addEventListener('resize', redraw);

  function selectNear(p) {
    const ys = logY ? durLog : dur;
    const sx = p.w / (view.x1 - view.x0);
    const sy = p.h / (view.y1 - view.y0);
    let best = -1;
    let bestD = 15 * 15;
    for (let i = 0; i < n; i++) {
      const dx = (begin[i] - view.x0) * sx - p.x;
      if (dx > 15 || dx < -15) continue;
      const dy = (view.y1 - ys[i]) * sy - p.y;
      const d = dx * dx + dy * dy;
      if (d < bestD) { bestD = d; best = i; }
    }
    if (best >= 0) select(best);
  }

  // A request's trace: its rows' blocks, inflated by the browser and
  // decoded by decode.js (mtfDecode) as FORMAT.md of minitrace-flight
  // describes. Each block is decoded once and kept: traces(b) gives a
  // block's, trace(i) the trace of the request at index i of the arrays
  // above (its rows' spans together), and attributes(b) the names,
  // properties and threads of a block's rows alone (fast enough to read
  // every block: some 2 µs a row).
  const blocks = new Map();
  const blockCount = meta.blockStarts.length;
  function blockSize(b) {
    return (b + 1 < blockCount ? meta.blockStarts[b + 1] : rowCount) - meta.blockStarts[b];
  }
  const attributeBlocks = new Map();
  function attributes(b) {
    if (!attributeBlocks.has(b)) {
      attributeBlocks.set(b, mtfDecode.inflate(bytesOf('b' + b)).then((raw) => mtfDecode.attributes(raw, blockSize(b))));
    }
    return attributeBlocks.get(b);
  }
  // A block's attributes, as attributes(b) gives them, without keeping
  // them unless they were kept already: for a single pass over every block.
  function readAttributes(b) {
    if (attributeBlocks.has(b)) return attributeBlocks.get(b);
    return mtfDecode.inflate(bytesOf('b' + b)).then((raw) => mtfDecode.attributes(raw, blockSize(b)));
  }
  // A block's traces, as traces(b) gives them (with `wanted`, only those
  // at the places t for which wanted(t) holds, null elsewhere), without
  // keeping them unless they were kept already: for a pass over many blocks.
  function readTraces(b, wanted) {
    if (blocks.has(b)) return blocks.get(b);
    return mtfDecode.inflate(bytesOf('b' + b)).then((raw) => mtfDecode.decodeBlock(raw, blockSize(b), wanted));
  }
  function blockOf(row) {
    let lo = 0;
    let hi = blockCount - 1;
    while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (meta.blockStarts[mid] <= row) lo = mid; else hi = mid - 1; }
    return lo;
  }
  const processOfRow = (row) => processes[meta.blockProcesses[blockOf(row)]];
  function traces(b) {
    if (!blocks.has(b)) {
      blocks.set(b, (async () => {
        const raw = await mtfDecode.inflate(bytesOf('b' + b));
        return mtfDecode.decodeBlock(raw, blockSize(b));
      })());
    }
    return blocks.get(b);
  }
  async function rowTrace(row) {
    const b = blockOf(row);
    return (await traces(b))[row - meta.blockStarts[b]];
  }
  // The request's trace: its entry's, with every row's spans, each with its
  // `process`, and each span's `parent` found among them all (a part's
  // spans hang under the entry's span that called its process).
  async function trace(index) {
    const rows = rowsOf(index);
    const decoded = await Promise.all(rows.map(rowTrace));
    const spans = [];
    decoded.forEach((part, k) => {
      const process = processOfRow(rows[k]);
      for (const span of part.spans) spans.push({ ...span, process });
    });
    if (rows.length > 1) {
      const first = new Map();
      spans.forEach((span, at) => { if (!first.has(span.spanId)) first.set(span.spanId, at); });
      for (const span of spans) span.parent = first.get(span.parentId) ?? -1;
    }
    return { ...decoded[0], spans, process: processOfRow(rows[0]),
      processes: rows.map(processOfRow) };
  }

  function fmtUnixNs(ns) {
    const iso = new Date(Number(ns / 1000000n)).toISOString();
    return `${iso.slice(0, 19)}.${String(ns % 1000000000n).padStart(9, '0')}Z`;
  }
  const fmtProperties = (properties) => properties.map(([k, v]) => `${k}=${v}`).join(', ');

  let selected = null;
  async function select(index) {
    selected = index;
    redraw();
    const request = await trace(index);
    if (selected !== index) return;
    $('selection-empty').hidden = true;
    $('selection').hidden = false;
    $('selected-trace').textContent = request.traceId;
    $('selected-name').textContent = request.name;
    $('selected-duration').textContent = fmtDur(Number(request.durationNs));
    $('selected-begin').textContent = `${fmtUnixNs(request.beginNs)} (${(begin[index] / 1e6).toFixed(6)}s into the dump)`;
    $('selected-process').textContent = request.processes.join(' → ');
    $('selected-thread').textContent = request.thread === 0 ? '— (root not held)' : String(request.thread);
    $('selected-spans').textContent = `${request.spans.length}${request.complete ? '' : ' (incomplete: some were made room for)'}`;
    $('selected-properties').textContent = fmtProperties(request.properties) || '—';
    drawTimeline(request);
    api.selected = request;
  }

  // The trace as a timeline: a row per span, each under its parent, in
  // start order; ticks mark events. Hover a bar for its properties and
  // events, click it for them in the panel below. A trace of more spans than
  // a panel can show draws its first MAX_ROWS rows.
  const MAX_ROWS = 2000;
  function drawTimeline(request) {
    const spans = request.spans;
    const children = spans.map(() => []);
    const top = [];
    spans.forEach((span, k) => (span.parent < 0 || span.parent === k ? top : children[span.parent]).push(k));
    const byBegin = (a, b) => (spans[a].beginNs < spans[b].beginNs ? -1 : spans[a].beginNs > spans[b].beginNs ? 1 : a - b);
    const rows = [];
    const seen = new Uint8Array(spans.length);
    const walk = (k, depth) => {
      if (seen[k]) return;
      seen[k] = 1;
      rows.push({ k, depth });
      children[k].sort(byBegin).forEach((c) => walk(c, depth + 1));
    };
    top.sort(byBegin).forEach((k) => walk(k, 0));
    // Spans in a cycle of parents (only a damaged recorder makes one): last.
    spans.forEach((_, k) => walk(k, 0));
    const offset = (ns) => Number(ns - request.beginNs);
    let lo = 0;
    let hi = 1;
    for (const span of spans) {
      lo = Math.min(lo, offset(span.beginNs));
      hi = Math.max(hi, offset(span.beginNs) + Number(span.durationNs));
    }
    const pct = (v) => (v - lo) / Math.max(1, hi - lo) * 100;
    const timeline = $('timeline');
    timeline.textContent = '';
    for (const { k, depth } of rows.slice(0, MAX_ROWS)) {
      const span = spans[k];
      const from = offset(span.beginNs);
      const duration = Number(span.durationNs);
      const line = document.createElement('div');
      line.className = 'span-row';
      const bar = document.createElement('div');
      bar.className = 'bar' + (k === request.root ? ' root' : '') + (span.events.length ? ' has-events' : '') +
        (span.properties.length ? ' has-properties' : '');
      bar.dataset.span = String(k);
      bar.style.left = `${pct(from)}%`;
      bar.style.width = `${pct(from + duration) - pct(from)}%`;
      bar.style.opacity = String(1 - Math.min(depth, 4) * 0.15);
      bar.title = spanSummary(request, k);
      for (const event of span.events) {
        const tick = document.createElement('i');
        tick.className = 'event';
        tick.style.left = `${Math.max(0, Math.min(100, Number(event.timestampNs - span.beginNs) / Math.max(1, duration) * 100))}%`;
        bar.append(tick);
      }
      const label = document.createElement('span');
      label.className = 'span-label';
      label.textContent = `${processes.length > 1 ? `${span.process}: ` : ''}${span.name} ${fmtDur(duration)}`;
      const end = pct(from + duration);
      // Beside the bar where there is room, else inside it.
      if (end < 60) label.style.left = `calc(${end}% + 4px)`;
      else if (pct(from) > 40) label.style.right = `calc(${100 - pct(from)}% + 4px)`;
      else { label.style.left = `calc(${pct(from)}% + 4px)`; label.classList.add('inside'); }
      line.append(bar, label);
      line.addEventListener('click', () => showSpan(request, k));
      timeline.append(line);
    }
    if (rows.length > MAX_ROWS) {
      const more = document.createElement('div');
      more.className = 'hint';
      more.textContent = `… and ${(rows.length - MAX_ROWS).toLocaleString('en')} more spans, not drawn`;
      timeline.append(more);
    }
    $('span-detail').hidden = true;
  }

  // One line per property and event of span k: the bar's tooltip.
  function spanSummary(request, k) {
    const span = request.spans[k];
    const lines = [`${processes.length > 1 ? `[${span.process}] ` : ''}${span.name}: ${fmtDur(Number(span.durationNs))} from +${fmtDur(Number(span.beginNs - request.beginNs))}`];
    for (const [key, value] of span.properties) lines.push(`${key} = ${value}`);
    for (const event of span.events) {
      const props = fmtProperties(event.properties);
      lines.push(`• ${event.name} at +${fmtDur(Number(event.timestampNs - span.beginNs))}${props ? ` (${props})` : ''}`);
    }
    return lines.join('\n');
  }

  // Span k's ids, times, properties and events, in the panel.
  function showSpan(request, k) {
    const span = request.spans[k];
    const detail = $('span-detail');
    detail.textContent = '';
    const title = document.createElement('h3');
    title.textContent = span.name;
    const list = document.createElement('dl');
    const row = (term, value) => {
      const dt = document.createElement('dt');
      dt.textContent = term;
      const dd = document.createElement('dd');
      dd.textContent = value;
      list.append(dt, dd);
    };
    row('process', span.process);
    row('span id', span.spanId);
    row('parent id', span.parentId + (span.parent >= 0 ? ` (${request.spans[span.parent].name})` : ''));
    if (span.traceId !== request.traceId) row('trace id', span.traceId);
    row('began', `+${fmtDur(Number(span.beginNs - request.beginNs))}`);
    row('duration', fmtDur(Number(span.durationNs)));
    for (const [key, value] of span.properties) row(key, value);
    const events = document.createElement('ol');
    events.className = 'events';
    for (const event of span.events) {
      const item = document.createElement('li');
      const props = fmtProperties(event.properties);
      item.textContent = `+${fmtDur(Number(event.timestampNs - span.beginNs))} ${event.name}${props ? `: ${props}` : ''}`;
      events.append(item);
    }
    detail.append(title, list);
    if (span.events.length) detail.append(events);
    detail.hidden = false;
    api.detail = { trace: request, span: k };
  }

  $('slowest').innerHTML = meta.slowest.map((r) =>
    `<li><a data-index="${r.index}">${escapeHtml(r.name)} ${fmtDur(r.durationNs)}</a></li>`).join('');
  $('slowest').addEventListener('click', (event) => {
    const index = event.target.dataset && event.target.dataset.index;
    if (index !== undefined) select(Number(index));
  });

  // The heatmap, the ranking of a brushed region's attributes, and the
  // percentiles per operation: explain.js, on the same data and time axis;
  // the critical path of the brushed requests by stage: critical.js.
  const critical = mtCritical.install({
    n, meta, blockCount, blockOf, readTraces, rowsOf, processOfRow, processes, fmtDur, escapeHtml, api,
  });
  const explainer = mtExplain.install({
    n, meta, begin, dur, durLog, kind, view: () => view, dpr, fit, axes, timeTicks, fmtDur, escapeHtml,
    readAttributes, blockCount, rowCount, rowsOf, isPart: (row) => isPart[row] === 1, processOfRow, processes, api,
    onBrush: critical.update,
  });

  api.view = () => ({ ...view });
  api.select = select;
  // Data access for tools built on the page: the request at index i of the
  // arrays (begin, duration, kind) as its decoded trace, every row's spans
  // with their process; a block's traces (rows), or their attributes; the
  // block of a row, and how many; the requests (count) and rows (rowCount:
  // more than count when processes' traces were joined); request i's rows
  // (rowsOf(i), its entry's first) and the process of each (processOf(i):
  // its entry's); the processes' labels, in the order of the dumps.
  api.trace = trace;
  api.traces = traces;
  api.attributes = attributes;
  api.blockOf = blockOf;
  api.blockCount = blockCount;
  api.count = n;
  api.rowCount = rowCount;
  api.rowsOf = rowsOf;
  api.processOf = (i) => processOfRow(entryRow[i]);
  api.processes = processes;
  drawAll();
  api.ready = true;
})();
