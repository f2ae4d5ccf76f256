'use strict';
// The block decoder of minitrace flight dumps, format version 2 (FORMAT.md
// of minitrace-flight): a block's payload, inflated by the browser, into the
// traces the Rust reader gives, each span with its ids, times, name,
// properties and events. The page includes this script before its own and
// decodes the block of a clicked request; tests run it under Node.
//
// A trace, as decoded:
//   { traceId: '32 hex digits', thread, complete,
//     spans: [{ traceId, spanId: '16 hex digits', parentId, parent, beginNs, durationNs, name,
//               properties: [[key, value]], events: [{ name, timestampNs, properties }] }],
//     root, name, properties, beginNs, durationNs }
// Times are BigInt nanoseconds since the Unix epoch, exact. `parent` is the
// index of the first span whose id is the span's parent id, or -1. The
// request's own attributes sit on the trace: `root` (the index of the root,
// the last span when held, else -1), `name` and `properties` (the root's),
// `beginNs` and `durationNs` (the root's, or the spans' extent without a
// root), as minitrace-view's Rust side computes them for the other views.
// `attributes` reads only what tells requests apart (names, properties,
// thread), fast enough for every request of a dump.
const mtfDecode = (() => {
  const SECTIONS = 20;
  const [TRACE_IDS, THREADS, FLAGS, BEGINS, SPAN_COUNTS, SPAN_TRACE_IDS, SPAN_IDS, ID_LITERALS, PARENTS,
    PARENT_LITERALS, NAMES, SPAN_BEGINS, SPAN_DURATIONS, PROPERTY_COUNTS, PROPERTIES, EVENT_COUNTS,
    EVENT_NAMES, EVENT_TIMES, EVENT_PROPERTY_COUNTS] = Array.from({ length: SECTIONS - 1 }, (_, k) => k + 1);
  const STRINGS = 0;
  const COMPLETE = 1;
  const OWN_TRACE_IDS = 2;
  const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, '0'));

  const wrap = (value) => BigInt.asUintN(64, value);
  const unzigzag = (value) => (value >> 1n) ^ -(value & 1n);
  // The value a stored delta from `base` stands for: wrapping, as in Rust.
  const undelta = (base, stored) => wrap(base + unzigzag(stored));
  const hex64 = (value) => value.toString(16).padStart(16, '0');

  function damaged(what) {
    throw new Error(`damaged block: ${what}`);
  }

  // A block's inflated payload, open: its sections as cursors, its string
  // table, and the readers of its numbers, ids and strings.
  function open(raw) {
    const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
    const cursor = (at, end) => ({ at, end });
    // A number that fits a double exactly: counts, indexes, threads.
    const num = (c) => {
      let value = 0;
      let scale = 1;
      let byte;
      do {
        if (c.at >= c.end || scale > 2 ** 42) damaged('a number');
        byte = raw[c.at++];
        value += (byte & 0x7f) * scale;
        scale *= 128;
      } while (byte & 0x80);
      return value;
    };
    // A u64, as BigInt: at most 10 bytes, the bits past 64 dropped.
    const big = (c) => {
      if (c.at < c.end && raw[c.at] < 0x80) return BigInt(raw[c.at++]);
      let value = 0n;
      let shift = 0n;
      let byte;
      do {
        if (c.at >= c.end || shift > 63n) damaged('a number');
        byte = raw[c.at++];
        value |= BigInt(byte & 0x7f) << shift;
        shift += 7n;
      } while (byte & 0x80);
      return wrap(value);
    };
    // Past a u64 as `big` reads it (the same checks); whether it is not 0.
    const skipBig = (c) => {
      let nonzero = false;
      let shift = 0;
      let byte;
      do {
        if (c.at >= c.end || shift > 63) damaged('a number');
        byte = raw[c.at++];
        if (byte & (shift < 63 ? 0x7f : 0x01)) nonzero = true;
        shift += 7;
      } while (byte & 0x80);
      return nonzero;
    };
    const take = (c, len) => {
      if (len > c.end - c.at) damaged('a section is shorter than its contents');
      const at = c.at;
      c.at += len;
      return at;
    };
    const idHex = (c, bytes) => {
      let text = '';
      for (let at = take(c, bytes), end = at + bytes; at < end; at++) text += HEX[raw[at]];
      return text;
    };
    const literal = (c) => view.getBigUint64(take(c, 8), true);

    const head = cursor(0, raw.length);
    const col = [];
    let at = 0;
    const lengths = Array.from({ length: SECTIONS }, () => num(head));
    at = head.at;
    for (const length of lengths) {
      col.push(cursor(at, at + length));
      at += length;
    }
    if (at !== raw.length) damaged('the section lengths');
    const text = new TextDecoder('utf-8', { fatal: true });
    const strings = [];
    for (let k = num(col[STRINGS]); k > 0; k--) {
      const len = num(col[STRINGS]);
      const from = take(col[STRINGS], len);
      strings.push(text.decode(raw.subarray(from, from + len)));
    }
    const string = (c) => {
      const index = num(c);
      if (index >= strings.length) damaged('a string reference');
      return strings[index];
    };
    const properties = (counts) => {
      const list = [];
      for (let k = num(col[counts]); k > 0; k--) list.push([string(col[PROPERTIES]), string(col[PROPERTIES])]);
      return list;
    };
    const skipProperties = (counts) => {
      for (let k = num(col[counts]); k > 0; k--) {
        string(col[PROPERTIES]);
        string(col[PROPERTIES]);
      }
    };
    return { col, num, big, skipBig, take, idHex, literal, string, properties, skipProperties };
  }

  // The traces of a block's inflated payload, which holds `count` of them;
  // with `wanted`, only the traces t for which wanted(t) holds, null in the
  // others' places, which are read past (checked as closely, several times
  // faster).
  function decodeBlock(raw, count, wanted) {
    const opened = open(raw);
    const { col, num, big, take, idHex, literal, string, properties } = opened;
    const traces = [];
    let reference = 0n;
    for (let t = 0; t < count; t++) {
      const begin = big(col[BEGINS]);
      reference = t === 0 ? begin : undelta(reference, begin);
      if (wanted && !wanted(t)) {
        skipTrace(raw, opened);
        traces.push(null);
        continue;
      }
      const traceId = idHex(col[TRACE_IDS], 16);
      const thread = num(col[THREADS]);
      const flags = raw[take(col[FLAGS], 1)];
      if (flags & ~(COMPLETE | OWN_TRACE_IDS)) damaged('unknown flags');
      const n = num(col[SPAN_COUNTS]);
      // The ids first: a parent may be named by its place, before or after.
      const ids = [];
      const parents = [];
      const spans = [];
      let previous = 0n;
      for (let i = 0; i < n; i++) {
        const spanTrace = flags & OWN_TRACE_IDS ? idHex(col[SPAN_TRACE_IDS], 16) : traceId;
        const code = big(col[SPAN_IDS]);
        previous = code === 0n ? literal(col[ID_LITERALS]) : undelta(wrap(previous + 1n), code - 1n);
        ids.push(previous);
        spans.push({ traceId: spanTrace, spanId: hex64(previous) });
      }
      let latestEnd = 0n;
      for (let i = 0; i < n; i++) {
        const code = num(col[PARENTS]);
        let parent;
        if (code === 0) parent = 0n;
        else if (code === 1) parent = literal(col[PARENT_LITERALS]);
        else if (code === 2) parent = ids[n - 1];
        else {
          const v = code - 3;
          const back = v % 2 === 1 ? -(v + 1) / 2 : v / 2;
          const place = i - 1 - back;
          if (!(place >= 0 && place < n)) damaged('a parent outside its trace');
          parent = ids[place];
        }
        const span = spans[i];
        parents.push(parent);
        span.parentId = hex64(parent);
        span.name = string(col[NAMES]);
        let predicted = reference;
        if (i > 0 && i + 1 < n) {
          const before = spans[i - 1];
          predicted = parent === ids[i - 1] ? before.beginNs : wrap(before.beginNs + before.durationNs);
        }
        span.beginNs = undelta(predicted, big(col[SPAN_BEGINS]));
        const stored = big(col[SPAN_DURATIONS]);
        span.durationNs = i > 0 && i + 1 === n ? wrap(undelta(latestEnd, stored) - span.beginNs) : stored;
        span.properties = properties(PROPERTY_COUNTS);
        span.events = [];
        for (let k = num(col[EVENT_COUNTS]); k > 0; k--) {
          const name = string(col[EVENT_NAMES]);
          const timestampNs = undelta(span.beginNs, big(col[EVENT_TIMES]));
          span.events.push({ name, timestampNs, properties: properties(EVENT_PROPERTY_COUNTS) });
        }
        const end = wrap(span.beginNs + span.durationNs);
        latestEnd = i === 0 || end > latestEnd ? end : latestEnd;
      }
      traces.push(withRequest({ traceId, thread, complete: (flags & COMPLETE) !== 0, spans }, ids, parents));
    }
    if (col.some((c) => c.at !== c.end)) damaged('a section holds more than its traces');
    return traces;
  }

  // Reads past a trace (after its begin), as decodeBlock would read it.
  function skipTrace(raw, { col, num, skipBig, take, literal, string, skipProperties }) {
    take(col[TRACE_IDS], 16);
    num(col[THREADS]);
    const flags = raw[take(col[FLAGS], 1)];
    if (flags & ~(COMPLETE | OWN_TRACE_IDS)) damaged('unknown flags');
    const n = num(col[SPAN_COUNTS]);
    if (flags & OWN_TRACE_IDS) take(col[SPAN_TRACE_IDS], 16 * n);
    for (let i = 0; i < n; i++) if (!skipBig(col[SPAN_IDS])) literal(col[ID_LITERALS]);
    for (let i = 0; i < n; i++) {
      const code = num(col[PARENTS]);
      if (code === 1) literal(col[PARENT_LITERALS]);
      else if (code > 2) {
        const v = code - 3;
        const place = i - 1 - (v % 2 === 1 ? -(v + 1) / 2 : v / 2);
        if (!(place >= 0 && place < n)) damaged('a parent outside its trace');
      }
      string(col[NAMES]);
      skipBig(col[SPAN_BEGINS]);
      skipBig(col[SPAN_DURATIONS]);
      skipProperties(PROPERTY_COUNTS);
      for (let k = num(col[EVENT_COUNTS]); k > 0; k--) {
        string(col[EVENT_NAMES]);
        skipBig(col[EVENT_TIMES]);
        skipProperties(EVENT_PROPERTY_COUNTS);
      }
    }
  }

  // What tells the requests of a block apart, without their times or ids:
  // for each, { traceId, thread, complete, name, properties, spanNames },
  // the root's name and properties as in decodeBlock, and the name of every
  // span in order, the root's last when held. It reads only the sections
  // that hold them, with no 64-bit arithmetic: many times faster than
  // decodeBlock, for looking at every request of a dump at once.
  function attributes(raw, count) {
    const { col, num, take, idHex, string, properties } = open(raw);
    const requests = [];
    for (let t = 0; t < count; t++) {
      const traceId = idHex(col[TRACE_IDS], 16);
      const thread = num(col[THREADS]);
      const flags = raw[take(col[FLAGS], 1)];
      const n = num(col[SPAN_COUNTS]);
      if (flags & OWN_TRACE_IDS) take(col[SPAN_TRACE_IDS], 16 * n);
      const spanNames = [];
      let last = [];
      for (let i = 0; i < n; i++) {
        spanNames.push(string(col[NAMES]));
        last = properties(PROPERTY_COUNTS);
        // The events' properties follow the span's in their section.
        for (let k = num(col[EVENT_COUNTS]); k > 0; k--) {
          string(col[EVENT_NAMES]);
          properties(EVENT_PROPERTY_COUNTS);
        }
      }
      const root = thread !== 0 && n > 0;
      requests.push({
        traceId, thread, complete: (flags & COMPLETE) !== 0,
        name: root ? spanNames[n - 1] : '(no root)', properties: root ? last : [], spanNames,
      });
    }
    return requests;
  }

  // Adds the parents' places and the request's own attributes to a trace
  // (`ids` and `parents`: its spans' ids and parent ids, as BigInt).
  function withRequest(trace, ids, parents) {
    const first = new Map();
    ids.forEach((id, at) => { if (!first.has(id)) first.set(id, at); });
    trace.spans.forEach((span, k) => {
      const at = first.get(parents[k]);
      span.parent = at === undefined ? -1 : at;
    });
    const spans = trace.spans;
    trace.root = trace.thread !== 0 && spans.length > 0 ? spans.length - 1 : -1;
    const root = trace.root >= 0 ? spans[trace.root] : null;
    trace.name = root ? root.name : '(no root)';
    trace.properties = root ? root.properties : [];
    if (root) {
      trace.beginNs = root.beginNs;
      trace.durationNs = root.durationNs;
    } else {
      // Saturating, as minitrace-view's request_extent.
      const max = (1n << 64n) - 1n;
      let begin = null;
      let end = 0n;
      for (const span of spans) {
        if (begin === null || span.beginNs < begin) begin = span.beginNs;
        const spanEnd = span.beginNs + span.durationNs;
        if (spanEnd > end) end = spanEnd > max ? max : spanEnd;
      }
      trace.beginNs = begin === null ? 0n : begin;
      trace.durationNs = end > trace.beginNs ? end - trace.beginNs : 0n;
    }
    return trace;
  }

  // A block's payload as stored (zlib), inflated by the platform.
  async function inflate(compressed) {
    const stream = new Blob([compressed]).stream().pipeThrough(new DecompressionStream('deflate'));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  return { decodeBlock, attributes, inflate, SECTIONS };
})();
