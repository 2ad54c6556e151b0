// view.mjs: times the viewer in Debian's chromium (playwright-core from web/node_modules) on
// the page at process.argv[2]: the first view (ms from navigation start to the page's
// "first-view-end" mark: summary, chart, flame graph, blocks and owners painted), then ROUNDS
// zooms (a drag over the chart), pans (the right arrow key: half a window) and cursor moves (a
// click on it), each timed by the page's own performance measures "zoom", "pan" and "cursor"
// (request, answer, redraw, paint), each alone (the page is back on the whole run and idle
// before the next). Prints one JSON line.
import { createRequire } from "node:module";
const require = createRequire(process.env.WEB + "/package.json");
const { chromium } = require("playwright-core");

const url = process.argv[2];
const rounds = Number(process.argv[3] || 5);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
const until = async (page, fn, arg) => {
  for (let i = 0; i < 600; i++) {
    if (await page.evaluate(fn, arg)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out: ${fn}`);
};
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  await page.goto(url);
  await until(page, () => document.body.dataset.ready === "1");
  await page.evaluate(() => new Promise((r) => setTimeout(r, 500))); // the page drawn; a user looks first
  const first = await page.evaluate(() => performance.getEntriesByName("first-view-end")[0].startTime);
  const box = await (await page.$("#chart .u-over")).boundingBox();
  for (let i = 0; i < rounds; i++) {
    const w = await page.evaluate(() => document.body.dataset.window || "");
    const a = 0.1 + 0.05 * i, b = a + 0.3;
    await page.mouse.move(box.x + box.width * a, box.y + box.height / 2);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * b, box.y + box.height / 2, { steps: 4 });
    await page.mouse.up();
    await until(page, (x) => (document.body.dataset.window || "") !== x, w);
    const wz = await page.evaluate(() => document.body.dataset.window);
    await page.keyboard.press("ArrowRight"); // pan by half the window
    await until(page, (x) => document.body.dataset.window !== x, wz);
    const c = await page.evaluate(() => document.body.dataset.cursor);
    await page.mouse.click(box.x + box.width * (0.2 + 0.1 * i), box.y + box.height / 2);
    await until(page, (x) => document.body.dataset.cursor !== x, c);
    // back to the whole run, and wait for it: the next action is timed alone
    const z = await page.evaluate(() => document.body.dataset.window);
    await page.dblclick("#chart .u-over", { position: { x: 5, y: 5 } });
    await until(page, (x) => document.body.dataset.window !== x, z);
    await page.evaluate(() => new Promise((r) => setTimeout(r, 200)));
  }
  const m = await page.evaluate(() => ({
    zoom: performance.getEntriesByName("zoom").map((e) => e.duration),
    pan: performance.getEntriesByName("pan").map((e) => e.duration),
    cursor: performance.getEntriesByName("cursor").map((e) => e.duration),
    parts: Object.fromEntries(["zoom:window", "zoom:series", "zoom:lifetimes", "zoom:table", "cursor:at", "lifetimes:place", "cursor:blocks", "cursor:owners",
      "cursor:flame", "cursor:segments"].map((n) => [n, performance.getEntriesByName(n).map((e) => Math.round(e.duration))])),
  }));
  if (process.env.VIEW_PARTS) console.error(JSON.stringify(m.parts));
  const med = (v) => { const s = [...v].sort((x, y) => x - y); return s.length ? s[s.length >> 1] : null; };
  console.log(JSON.stringify({ first_view_ms: Math.round(first), zoom_ms_median: Math.round(med(m.zoom)),
    zoom_ms_max: Math.round(Math.max(...m.zoom)), pan_ms_median: Math.round(med(m.pan)),
    pan_ms_max: Math.round(Math.max(...m.pan)), cursor_ms_median: Math.round(med(m.cursor)),
    cursor_ms_max: Math.round(Math.max(...m.cursor)) }));
} finally {
  await browser.close();
}
