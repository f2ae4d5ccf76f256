// Asks a minitrace-view page "why were these slow?" as a person would, in
// headless Chromium, and prints one JSON line of what it answered;
// screenshots go to OUTDIR.
//
//   node scripts/browser/explain.mjs PAGE.html OUTDIR MIN_US   (run by scripts/browser.sh)
//
// It waits for the page's load, counts the heatmap's drawn pixels, drags
// the mouse over the heatmap from its left edge to its right, from the
// latency MIN_US (µs) to the top, waits for the ranking of the region's
// attributes, and reads it, the table of latency by operation and the
// critical path by stage; then brushes every request from MIN_US up through
// the page's hook and reads that critical path as numbers. The caller
// asserts on the results.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

const [pagePath, outDir, minUs] = process.argv.slice(2);
if (!pagePath || !outDir || !(Number(minUs) > 0)) {
  console.error('usage: explain.mjs PAGE.html OUTDIR MIN_US');
  process.exit(2);
}
fs.mkdirSync(outDir, { recursive: true });
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'minitrace-view-explain-'));
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

  await page.goto(`file://${path.resolve(pagePath)}`, { waitUntil: 'load', timeout: 120_000 });
  await page.waitForFunction(() => window.mtview && window.mtview.ready === true, null, { timeout: 120_000 });

  result.title = await page.title();
  result.heatmapPixels = await page.$eval('#heatmap', (canvas) => {
    const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
    let drawn = 0;
    for (let p = 3; p < data.length; p += 4) if (data[p] !== 0) drawn++;
    return drawn;
  });

  // The drag: from (left edge, MIN_US) to (right edge, top), in client pixels.
  const drag = await page.evaluate((min) => {
    const rect = document.getElementById('heatmap').getBoundingClientRect();
    const at = window.mtview.heatmapPoint(0, min);
    return { x0: rect.left + 1, y0: Math.min(rect.bottom - 1, at.y), x1: rect.right - 1, y1: rect.top + 1 };
  }, Number(minUs));
  await page.mouse.move(drag.x0, drag.y0);
  await page.mouse.down();
  await page.mouse.move((drag.x0 + drag.x1) / 2, (drag.y0 + drag.y1) / 2, { steps: 4 });
  await page.mouse.move(drag.x1, drag.y1, { steps: 4 });
  await page.mouse.up();
  const started = Date.now();
  await page.waitForFunction(() => window.mtview.explained !== null, null, { timeout: 120_000 });
  result.explainMs = Date.now() - started;
  result.selected = await page.evaluate(() => window.mtview.explained.selected);
  result.status = await page.$eval('#explain-status', (el) => el.textContent);
  result.ranking = await page.$$eval('#explain-table tbody tr', (rows) => rows
    .filter((row) => row.cells.length === 5)
    .map((row) => Array.from(row.cells, (cell) => cell.textContent)));
  result.operations = await page.$$eval('#operations tbody tr', (rows) =>
    rows.map((row) => Array.from(row.cells, (cell) => cell.textContent)));
  result.operationHeads = await page.$$eval('#operations thead th', (cells) => cells.map((cell) => cell.textContent));
  // The critical path of the dragged selection, by stage, as shown.
  await page.waitForFunction(() => window.mtview.criticalPath !== null, null, { timeout: 120_000 });
  result.criticalMs = Date.now() - started;
  result.criticalStatus = await page.$eval('#critical-status', (el) => el.textContent);
  result.critical = await page.$$eval('#critical-table tbody tr', (rows) =>
    rows.map((row) => Array.from(row.cells, (cell) => cell.textContent)));
  await page.screenshot({ path: path.join(outDir, 'explained.png'), fullPage: true });
  // The same for an exact region, every request from MIN_US up, as numbers.
  result.criticalExact = await page.evaluate(async (min) => {
    await window.mtview.brush({ t0: -1e18, t1: 1e18, d0: min, d1: 1e18 });
    while (window.mtview.criticalPath === null) await new Promise((resolve) => setTimeout(resolve, 20));
    return window.mtview.criticalPath;
  }, Number(minUs));
} catch (error) {
  result.errors.push(`explain: ${error.message}`);
} finally {
  await context.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
console.log(JSON.stringify(result));
