'use strict';
// The page's formatting of durations, times, axis ticks and HTML text.
const mtFormat = (() => {
  function fmtDur(ns) {
    if (ns < 1e3) return `${Math.round(ns)}ns`;
    const [v, unit] = ns < 1e6 ? [ns / 1e3, 'µs'] : ns < 1e9 ? [ns / 1e6, 'ms'] : [ns / 1e9, 's'];
    return `${v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0)}${unit}`;
  }

  // Seconds since the dump's first request, with as many decimals as `step` (µs) needs.
  function fmtSeconds(us, step) {
    const decimals = Math.min(9, Math.max(0, Math.ceil(-Math.log10(step / 1e6))));
    return `${(us / 1e6).toFixed(decimals)}s`;
  }

  function niceTicks(a, b, count) {
    const raw = (b - a) / Math.max(1, count);
    let step = Math.pow(10, Math.floor(Math.log10(raw)));
    const err = raw / step;
    step *= err >= 7.5 ? 10 : err >= 3.5 ? 5 : err >= 1.5 ? 2 : 1;
    const ticks = [];
    for (let t = Math.ceil(a / step) * step; t <= b; t += step) ticks.push(t);
    return { ticks, step };
  }

  function escapeHtml(text) {
    return text.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
  }

  return { fmtDur, fmtSeconds, niceTicks, escapeHtml };
})();
