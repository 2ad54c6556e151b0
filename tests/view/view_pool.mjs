// view_pool.mjs: the allocator state in chromium (playwright-core) for view_pool.c's run at
// process.argv[2] (served, or a report file with process.argv[4] = "report"): at the peak (the
// last block handed out) and after each "< event" press, the regions and blocks drawn are
// exactly the pool's; a click on a block shows its stack. Screenshots into process.argv[3].
import { createRequire } from "node:module";
const require = createRequire(process.env.WEB + "/package.json");
const { chromium } = require("playwright-core");

const [url, outDir, kind = "view"] = process.argv.slice(2);
let fails = 0, checks = 0;
const check = (what, ok, got) => {
  checks++;
  if (ok) console.log(`ok: ${what}`);
  else { fails++; console.log(`FAIL: ${what}: got [${got}]`); }
};
async function until(page, fn, arg) {
  for (let i = 0; i < 300; i++) {
    if (await page.evaluate(fn, arg)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${fn}`);
}
const KiB = 1024, MiB = 1024 * KiB;
const A = `${MiB}`, B = `${2 * MiB}`;
const states = [
  ["at the peak: A holds 128 KiB at 512 KiB, B holds 1 MiB and 512 KiB",
    `${A}:${512 * KiB}+${128 * KiB}:${512 * KiB}|${B}:0+${MiB},${MiB}+${512 * KiB}:${512 * KiB}`],
  ["one event back: B's second block not yet handed out",
    `${A}:${512 * KiB}+${128 * KiB}:${512 * KiB}|${B}:0+${MiB}:${MiB}`],
  ["two events back: A's first block not yet freed",
    `${A}:0+${256 * KiB},${512 * KiB}+${128 * KiB}:${384 * KiB}|${B}:0+${MiB}:${MiB}`],
];

// A screenshot of the whole page. Sections off screen are not rendered (content-visibility:
// auto), which a full-page capture would show blank: they are rendered for it.
async function shot(page, path) {
  await page.addStyleTag({ content: "section { content-visibility: visible !important; }" });
  await page.screenshot({ path, fullPage: true });
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1100 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(url);
  await until(page, () => document.body.dataset.ready === "1" && document.body.dataset.segments);
  for (let i = 0; i < states.length; i++) {
    if (i) {
      const before = await page.getAttribute("body", "data-segments");
      await page.click("#sprev");
      await until(page, (b) => document.body.dataset.segments !== b, before);
    }
    const got = await page.getAttribute("body", "data-segments");
    check(states[i][0], got === states[i][1], got);
    await page.locator("#segs").scrollIntoViewIfNeeded();
    await shot(page, `${outDir}/${kind}-pool-${i}.png`);
  }
  // B's 1 MiB block: the second row, from the bars' start to half of B's width
  const box = await (await page.$("#segs")).boundingBox();
  await page.mouse.click(box.x + 360 + (box.width - 364) * 0.2, box.y + 16 + 8);
  await until(page, () => document.getElementById("stack").textContent.includes("main ("));
  const stack = (await page.textContent("#stack")).trim();
  check("a click on B's 1 MiB block shows its stack (view_pool.c:19)", /^1\.00 MiB block/.test(stack) && /view_pool\.c:19/.test(stack), stack);
  check("no error in the page", errors.length === 0, errors.join(" | "));
} finally {
  await browser.close();
}
console.log(`${checks - fails}/${checks} checks passed`);
process.exit(fails ? 1 : 0);
