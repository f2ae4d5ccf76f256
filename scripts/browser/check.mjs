// Opens a minitrace-view page in headless Chromium as a person would, and
// prints one JSON line of what it saw; screenshots go to OUTDIR.
//
//   node scripts/browser/check.mjs PAGE.html OUTDIR     (run by scripts/browser.sh)
//
// It waits for the page's load, finds the scatter's drawn pixels on its
// canvas, clicks the topmost drawn point (the slowest request), reads the
// trace panel (its process and the timeline's labels too), and clicks the
// first span with events for its detail. The caller asserts on the results.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

const [pagePath, outDir] = process.argv.slice(2);
if (!pagePath || !outDir) {
  console.error('usage: check.mjs PAGE.html OUTDIR');
  process.exit(2);
}
fs.mkdirSync(outDir, { recursive: true });
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'minitrace-view-check-'));
const result = { errors: [] };

// This machine has no network: every background fetch Chromium would make is off.
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  viewport: { width: 1400, height: 1100 },
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = context.pages()[0] || await context.newPage();
  page.on('pageerror', (error) => result.errors.push(`pageerror: ${error.message}`));
  page.on('console', (message) => { if (message.type() === 'error') result.errors.push(`console: ${message.text()}`); });
  page.on('request', (request) => {
    if (!request.url().startsWith('file:') && !request.url().startsWith('data:') && !request.url().startsWith('blob:')) {
      result.errors.push(`network request: ${request.url()}`);
    }
  });

  const started = Date.now();
  await page.goto(`file://${path.resolve(pagePath)}`, { waitUntil: 'load', timeout: 120_000 });
  await page.waitForFunction(() => window.mtview && window.mtview.ready === true, null, { timeout: 120_000 });
  result.loadMs = Date.now() - started;
  await page.screenshot({ path: path.join(outDir, 'loaded.png'), fullPage: true });

  result.empty = await page.evaluate(() => Boolean(document.getElementById('empty-state')));
  result.stats = await page.$eval('#stats', (el) => el.textContent);
  result.count = await page.evaluate(() => window.mtview.count === undefined ? null : window.mtview.count);
  if (!result.empty) {
    // The scatter canvas holds only points: any pixel with some opacity is one.
    const scan = await page.$eval('#scatter', (canvas) => {
      const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
      let drawn = 0;
      let top = null;
      for (let p = 0; p < data.length; p += 4) {
        if (data[p + 3] === 0) continue;
        drawn++;
        if (top === null) top = { x: (p / 4) % canvas.width, y: Math.floor(p / 4 / canvas.width) };
      }
      const box = canvas.getBoundingClientRect();
      const scale = canvas.width / box.width;
      return { drawn, pixels: canvas.width * canvas.height, top,
        click: top && { x: box.left + (top.x + 1) / scale, y: box.top + (top.y + 1) / scale } };
    });
    result.scatterPixels = scan.drawn;
    result.canvasPixels = scan.pixels;
    result.inflightPixels = await page.$eval('#inflight', (canvas) => {
      const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
      let drawn = 0;
      for (let p = 3; p < data.length; p += 4) if (data[p] !== 0) drawn++;
      return drawn;
    });

    if (scan.click) {
      await page.mouse.click(scan.click.x, scan.click.y);
      await page.waitForFunction(() => /^[0-9a-f]{32}$/.test(document.getElementById('selected-trace').textContent),
        null, { timeout: 10_000 }).catch(() => {});
      result.selectedTrace = await page.$eval('#selected-trace', (el) => el.textContent);
      result.selectedDuration = await page.$eval('#selected-duration', (el) => el.textContent);
      result.selectedProperties = await page.$eval('#selected-properties', (el) => el.textContent);
      result.selectedProcess = await page.$eval('#selected-process', (el) => el.textContent);
      result.spanLabels = await page.$$eval('#timeline .span-label', (labels) => labels.map((label) => label.textContent));
      result.bars = await page.$$eval('#timeline .bar', (bars) => bars.length);
      result.visibleBars = await page.$$eval('#timeline .bar', (bars) =>
        bars.filter((bar) => bar.getBoundingClientRect().width >= 1).length);
      result.eventTicks = await page.$$eval('#timeline .bar .event', (ticks) => ticks.length);
      // The first span with events: its tooltip, and its detail on a click.
      const withEvents = await page.$('#timeline .bar.has-events');
      result.spanTooltip = withEvents && await withEvents.getAttribute('title');
      result.spanDetail = null;
      if (withEvents) {
        await withEvents.click();
        await page.waitForFunction(() => !document.getElementById('span-detail').hidden, null, { timeout: 10_000 });
        result.spanDetail = await page.$eval('#span-detail', (el) => el.textContent);
      }
      await page.screenshot({ path: path.join(outDir, 'selected.png'), fullPage: true });
    }

    // The attributes of every request, a block at a time, through the
    // page's data access: how many, the names, and the time it took.
    result.attributes = await page.evaluate(async () => {
      const started = performance.now();
      const names = {};
      let requests = 0;
      let spans = 0;
      for (let b = 0; b < window.mtview.blockCount; b++) {
        for (const request of await window.mtview.attributes(b)) {
          requests++;
          spans += request.spanNames.length;
          names[request.name] = (names[request.name] || 0) + 1;
        }
      }
      return { requests, spans, names, ms: Math.round(performance.now() - started) };
    });

    // The heatmap, and a brush over every request slower than 10 ms: the
    // ranking of their attributes (read above, or in the background).
    result.heatmapPixels = await page.$eval('#heatmap', (canvas) => {
      const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
      let drawn = 0;
      for (let p = 3; p < data.length; p += 4) if (data[p] !== 0) drawn++;
      return drawn;
    });
    result.heatmapMs = await page.evaluate(() => Math.round(window.mtview.heatmapMs));
    result.slowerThan10ms = await page.evaluate(async () => {
      const started = performance.now();
      const explained = await window.mtview.brush({ t0: -1e18, t1: 1e18, d0: 10_000, d1: 1e18 });
      const ms = Math.round(performance.now() - started);
      // The critical path of the same selection, by stage.
      while (window.mtview.criticalPath === null) await new Promise((resolve) => setTimeout(resolve, 20));
      const critical = window.mtview.criticalPath;
      return { selected: explained.selected, top: explained.rows.slice(0, 3).map((row) => row.label), ms,
        critical: { selection: critical.selection, baseline: critical.baseline, blocks: critical.blocks,
          top: critical.stages.slice(0, 3).map((row) => row.stage), ms: Math.round(performance.now() - started) } };
    });

    // A wheel turn over the scatter zooms both axes in. (The span's click
    // above may have scrolled the scatter out of view.)
    const before = await page.evaluate(() => window.mtview.view());
    await page.$eval('#scatter', (canvas) => canvas.scrollIntoView({ block: 'center' }));
    const box = await page.$eval('#scatter', (canvas) => {
      const r = canvas.getBoundingClientRect();
      return { x: r.left + r.width / 2, y: r.top + r.height / 2 };
    });
    await page.mouse.move(box.x, box.y);
    await page.mouse.wheel(0, -400);
    await page.waitForTimeout(300);
    const after = await page.evaluate(() => window.mtview.view());
    result.zoomedIn = after.x1 - after.x0 < before.x1 - before.x0 && after.y1 - after.y0 < before.y1 - before.y0;
    await page.screenshot({ path: path.join(outDir, 'zoomed.png'), fullPage: true });
  }
} catch (error) {
  result.errors.push(`check: ${error.message}`);
} finally {
  await context.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
console.log(JSON.stringify(result));
