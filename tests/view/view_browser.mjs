// view_browser.mjs: drives Debian's chromium (playwright-core, never a downloaded browser) on
// the viewer page at process.argv[2] (the URL memscope view printed, or the file:// URL of
// memscope report's file, process.argv[4] = "report") and checks what the page
// shows for view_known.c's run: the exact peak and leak, the first site at the peak, the
// stack of the largest block after a click on it, a drag on the chart that zooms, and a click
// that moves the cursor. Prints one "ok:"/"FAIL:" line per check and the times the page
// measured (performance marks); saves a screenshot of each state into process.argv[3]. Then
// the owner tree by Insight's categories, the lifetime chart coloured by owner, the Events
// table, and the findings' links (a call site, an address, a step) into the tables. With
// process.argv[4] = "ineff", b_ineff.c's run instead: its three inefficient blocks outlined
// and listed once the thresholds are set to 100 ms; with "stacked", mmap_anon.c's run: its heap
// and mmap layers split, then stacked (the usage monitor's RSS, PSS and USS beside them, never
// stacked); with "usage", usage_kinds.c's shm run: its RSS, PSS and USS drawn beside its live
// bytes, PSS and USS at least the 32 MiB shared memory object no allocation shows; with
// "device", cuda_oom.c's run against the test driver and the test NVML (40 MiB of context): each
// device's memory used that NVML reported drawn beside them, device 0's at its 60 MiB; with
// "svg" (process.argv[5]: how many series), a picture of `memscope usage --plot` opened from
// disk: an SVG document whose series are all drawn inside the frame.
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

// Waits until fn(arg) is true in the page (up to 30 s). Not page.waitForFunction: its polling
// evaluates a string, which the viewer's Content-Security-Policy (no eval) refuses.
async function until(page, fn, arg) {
  for (let i = 0; i < 300; i++) {
    if (await page.evaluate(fn, arg)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${fn}`);
}

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
  const errors = [], requests = [];
  page.on("request", (r) => { if (!r.url().startsWith("file:") && !r.url().startsWith("data:")) requests.push(r.url()); });
  page.on("dialog", (d) => { errors.push(`a dialog opened: ${d.message()}`); d.dismiss(); });
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  if (kind === "svg") {
    await page.goto(url);
    const got = await page.evaluate(() => {
      const svg = document.documentElement, ax = svg.querySelectorAll("g.axes line");
      const frame = { left: +ax[0].getAttribute("x1"), top: +ax[0].getAttribute("y1"),
        bottom: +ax[0].getAttribute("y2"), right: +ax[1].getAttribute("x2") };
      const series = [...svg.querySelectorAll("g.series")].map((g) => {
        const b = g.querySelector("polyline").getBBox();
        return { name: g.dataset.name, inside: b.x >= frame.left - 0.5 && b.x + b.width <= frame.right + 0.5 &&
          b.y >= frame.top - 0.5 && b.y + b.height <= frame.bottom + 0.5, length: g.querySelector("polyline").getTotalLength() };
      });
      return { root: svg.tagName, series, legend: svg.querySelectorAll("g.legend text").length,
        errors: document.getElementsByTagName("parsererror").length };
    });
    check("the picture is an SVG document chromium parses", got.root === "svg" && got.errors === 0, `${got.root} ${got.errors}`);
    check(`${process.argv[5]} series, each with its legend line`, got.series.length === +process.argv[5] && got.legend === got.series.length,
      `${got.series.length} ${got.legend}`);
    check("every series drawn inside the frame, with a length", got.series.every((x) => x.inside && x.length > 0),
      JSON.stringify(got.series));
    await page.screenshot({ path: `${outDir}/usage-plot.png` });
    check("no error in the page", errors.length === 0, errors.join(" | "));
    await browser.close();
    console.log(`${checks - fails}/${checks} checks passed`);
    process.exit(fails ? 1 : 0);
  }
  await page.goto(url);
  await page.waitForSelector("body[data-ready='1']", { timeout: 30000 });
  await shot(page, `${outDir}/${kind}-first.png`);

  const text = async (sel) => (await page.textContent(sel)).trim();
  if (kind === "usage") {
    const labels = await page.getAttribute("body", "data-series-labels");
    check("usage_kinds shm: live bytes, then its RSS, PSS, USS", /^all memory\|pid \d+ RSS\|pid \d+ PSS\|pid \d+ USS$/.test(labels), labels);
    const peaks = (await page.getAttribute("body", "data-usage-peaks")).split(":").map(Number);
    const MIB = 1048576;
    check("usage_kinds shm: RSS, PSS and USS drawn at 32 MiB or more (the shared memory object)",
      peaks.length === 4 && peaks.slice(1).every((v) => v >= 32 * MIB && v <= 40 * MIB), peaks.join(":"));
    await page.screenshot({ path: `${outDir}/usage.png` });
    check("no error in the page", errors.length === 0, errors.join(" | "));
    await browser.close();
    console.log(`${checks - fails}/${checks} checks passed`);
    process.exit(fails ? 1 : 0);
  }
  if (kind === "device") {
    const labels = await page.getAttribute("body", "data-series-labels");
    check("cuda_oom: live bytes, its RSS, PSS, USS, then the memory used of devices 0 and 1",
      /\|pid \d+ RSS\|pid \d+ PSS\|pid \d+ USS\|device 0 used\|device 1 used$/.test(labels), labels);
    const MIB = 1048576;
    const peaks = await page.getAttribute("body", "data-device-peaks");
    check("device 0 drawn at NVML's 60 MiB (20 MiB allocated and 40 MiB of context), device 1 at 0",
      peaks === `0:${60 * MIB}|1:0`, peaks);
    await page.screenshot({ path: `${outDir}/device.png` });
    check("no error in the page", errors.length === 0, errors.join(" | "));
    await browser.close();
    console.log(`${checks - fails}/${checks} checks passed`);
    process.exit(fails ? 1 : 0);
  }
  if (kind === "stacked") {
    check("mmap_anon: no access recorded, no inefficiency thresholds offered", !(await page.isVisible("#ineff")), "visible");
    const split = await page.getAttribute("body", "data-series-labels");
    check("mmap_anon: split, the total and each layer, then its RSS, PSS, USS",
      /^all memory\|pid \d+ mmap\|pid \d+ heap\|pid \d+ RSS\|pid \d+ PSS\|pid \d+ USS$/.test(split), split);
    await page.selectOption("#smode", "stacked");
    await until(page, () => (document.body.dataset.seriesLabels || "").includes("stacked"));
    const st = await page.getAttribute("body", "data-series-labels");
    check("mmap_anon: stacked, heap on top of mmap; RSS, PSS, USS not stacked",
      /^pid \d+ heap \(stacked\)\|pid \d+ mmap \(stacked\)\|pid \d+ RSS\|pid \d+ PSS\|pid \d+ USS$/.test(st), st);
    await page.screenshot({ path: `${outDir}/stacked.png` });
    check("no error in the page", errors.length === 0, errors.join(" | "));
    await browser.close();
    console.log(`${checks - fails}/${checks} checks passed`);
    process.exit(fails ? 1 : 0);
  }
  if (kind === "ineff") {
    check("the inefficiency thresholds are offered", await page.isVisible("#ineff"), "hidden");
    for (const k of ["lazy", "delayed", "idle"]) await page.fill(`#ineff input[name=${k}]`, "100000000");
    await page.click("#ineff button[type=submit]");
    await until(page, () => document.body.dataset.lifeIneff === "3");
    check("b_ineff: 3 inefficient blocks outlined in the lifetime chart at 100 ms", true);
    await page.check("#tform input[name=ineff]");
    await page.selectOption("#tform select[name=sort]", "size");
    await page.selectOption("#tform select[name=order]", "asc");
    await page.click("#tform button[type=submit]");
    await until(page, () => document.body.dataset.tableRows === "0:3:3" && document.body.dataset.tableOrder === "size:asc");
    const rows = await text("#tblocks tbody");
    check("b_ineff: the table of inefficient blocks: 600 B, 700 B, 800 B", /^600 B.*700 B.*800 B/s.test(rows), rows);
    await shot(page, `${outDir}/ineff.png`);
    check("no error in the page", errors.length === 0, errors.join(" | "));
    await browser.close();
    console.log(`${checks - fails}/${checks} checks passed`);
    process.exit(fails ? 1 : 0);
  }
  check("the peak shows 11.0 MiB", (await text("#peak")) === "11.0 MiB", await text("#peak"));
  check("never freed: 3.00 MiB in 3 blocks", (await text("#leaked")) === "3.00 MiB in 3 blocks", await text("#leaked"));
  const site0 = await text("#peaksites tbody tr:first-child");
  check("the first site at the peak is activations(), 8.00 MiB", /^8\.00 MiB\s*activations \(/.test(site0), site0);
  const leak0 = await text("#leaksites tbody tr:first-child");
  check("the site never freed is weights(), 3.00 MiB", /^3\.00 MiB\s*weights \(/.test(leak0), leak0);
  check("the cursor starts at the peak: 4 blocks live, 11.0 MiB", (await text("#bcount")) === "4 live, 11.0 MiB", await text("#bcount"));
  const own = await text("#owners tbody");
  check("owners at the cursor: model@activation 8.00 MiB, model@weight 3.00 MiB",
    /^model@activation\s*8\.00 MiB\s*1\s*model@weight\s*3\.00 MiB\s*3$/.test(own), own);
  const tree = await page.getAttribute("body", "data-owner-tree");
  check("the owner tree: all > model > activation, weight", tree === "all:11534336|model:11534336|activation:8388608|weight:3145728", tree);
  const drawn = [await page.getAttribute("body", "data-marks"), await page.getAttribute("body", "data-ranges")].join(" ");
  check("the chart draws the mark and the two nested ranges", drawn === "weights loaded forward@0|layer1@1", drawn);
  const life = Number(await page.getAttribute("body", "data-life-blocks"));
  check("the lifetime chart draws the run's 5 blocks", life === 5, life);
  const lbox = await (await page.$("#life")).boundingBox();
  await page.evaluate(() => { document.getElementById("stack").textContent = ""; });
  await page.mouse.click(lbox.x + lbox.width * 0.7, lbox.y + lbox.height * 0.3);
  await until(page, () => document.getElementById("stack").textContent.includes("native"));
  const lstack = await text("#stack");
  check("a click on the lifetime chart's 8 MiB band shows activations()' stack",
    /^8\.00 MiB block/.test(lstack) && /activations \(/.test(lstack), lstack);
  const nodes = Number(await page.getAttribute("body", "data-flame-nodes"));
  check("the flame graph draws its nodes", nodes >= 4, nodes);
  { // the flame search: each matching frame's bytes once, the rest dimmed
    const found = [];
    for (const q of ["activations", "WEIGHTS", "main", "no such frame", ""]) {
      await page.fill("#fsearch", q);
      found.push(await page.getAttribute("body", "data-flame-match"));
    }
    check("flame search: activations 8 MiB, weights 3 MiB, main 11 MiB once, none, off",
      found.join(" ") === "8388608 3145728 11534336 0 ", found.join(" "));
    check("flame search off: no share said", (await text("#fmatch")) === "", await text("#fmatch"));
    await page.fill("#fsearch", "activations");
    check("flame search: the share said", (await text("#fmatch")) === "matched: 8.00 MiB (72.7% of all)", await text("#fmatch"));
    await page.fill("#fsearch", "");
  }

  // a click on the largest block shows its stack
  await page.click("#blocks tbody tr:first-child");
  await until(page, () => document.getElementById("stack").textContent.includes("native"));
  const stack = await text("#stack");
  check("the largest block's stack: 8.00 MiB, activations then main",
    /^8\.00 MiB block/.test(stack) && /activations \(.*\n\s*main \(/.test(stack), stack);
  await shot(page, `${outDir}/${kind}-stack.png`);

  // the blocks table: every block of the run, then filtered by stack text, then sorted
  await page.locator("#tform").scrollIntoViewIfNeeded(); // the table follows the window once seen
  await until(page, () => (document.body.dataset.tableRows || "").endsWith(":5"));
  check("the blocks table: the run's 5 blocks", (await page.getAttribute("body", "data-table-rows")) === "0:5:5",
    await page.getAttribute("body", "data-table-rows"));
  await page.fill("#tform input[name=site]", "weights");
  await page.click("#tform button[type=submit]");
  await until(page, () => document.body.dataset.tableRows === "0:3:3");
  check("the blocks table filtered by 'weights' in the stack: 3 rows of 1.00 MiB",
    (await text("#tblocks tbody")).split("1.00 MiB").length - 1 === 3, await text("#tblocks tbody"));
  await page.fill("#tform input[name=site]", "");
  await page.selectOption("#tform select[name=sort]", "alloc");
  await page.selectOption("#tform select[name=order]", "asc");
  await page.click("#tform button[type=submit]");
  await until(page, () => document.body.dataset.tableRows === "0:5:5" &&
    document.querySelector("#tblocks tbody tr td").textContent === "4.00 KiB");
  check("the blocks table by allocation time: deep()'s 4 KiB first", true);

  // a drag over the chart zooms into a window
  const over = await page.$("#chart .u-over");
  await over.scrollIntoViewIfNeeded();
  const box = await over.boundingBox();
  const before = await page.getAttribute("body", "data-window");
  await page.mouse.move(box.x + box.width * 0.2, box.y + box.height / 2);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.6, box.y + box.height / 2, { steps: 5 });
  await page.mouse.up();
  await until(page, (b) => document.body.dataset.window && document.body.dataset.window !== b, before);
  const win = (await page.getAttribute("body", "data-window")).split(",").map(Number);
  const t1 = Number(await page.getAttribute("body", "data-t1"));
  const frac = (win[1] - win[0]) / (t1 + 1);
  check("a drag over 40% of the chart zooms to about 40% of the run", frac > 0.3 && frac < 0.5, frac);
  // the right arrow key pans by half the window, its width kept
  await page.keyboard.press("ArrowRight");
  await until(page, (b) => document.body.dataset.window !== b, win.join(","));
  const panned = (await page.getAttribute("body", "data-window")).split(",").map(Number);
  const w0 = win[1] - win[0];
  check("the right arrow pans by half the window, its width kept",
    panned[1] - panned[0] === w0 && Math.abs(panned[0] - win[0] - w0 / 2) <= 1, panned.join(","));
  await page.keyboard.press("ArrowLeft");
  await until(page, (b) => document.body.dataset.window !== b, panned.join(","));
  await shot(page, `${outDir}/${kind}-zoom.png`);

  // a click on the chart moves the cursor; the views follow
  const oldCursor = await page.getAttribute("body", "data-cursor");
  await page.mouse.click(box.x + box.width * 0.05, box.y + box.height / 2);
  await until(page, (c) => document.body.dataset.cursor !== c, oldCursor);
  check("a click on the chart moves the cursor", true);
  await shot(page, `${outDir}/${kind}-cursor.png`);

  // the flame graph of what was never freed
  await page.selectOption("#fmode", "leaked");
  await until(page, () => document.getElementById("ftotal").textContent.startsWith("3.00 MiB"));
  check("flame of what was never freed: 3.00 MiB", true);
  await shot(page, `${outDir}/${kind}-leaked.png`);

  await page.locator("#atext").scrollIntoViewIfNeeded(); // the first report is asked for when seen
  await until(page, () => document.body.dataset.analysis === "leaks" && !document.getElementById("atext").textContent.startsWith("running"));
  const findings = await text("#atext");
  check("findings: analyze leaks' report names weights()", /weights \(/.test(findings), findings.slice(0, 200));

  // compare of two steps, picked in the findings (the first after the warm-up and the last)
  if (kind === "report") {
    const offered = await page.evaluate(() => [...document.querySelectorAll("#aname option")].map((o) => o.value));
    check("findings: a report offers no compare (it needs steps picked)", !offered.includes("compare"), offered.join(" "));
  } else {
    await page.selectOption("#aname", "compare");
    await until(page, () => document.body.dataset.analysis === "compare");
    const cmp = await text("#atext");
    check("findings: compare of steps 2 and 4, weights() 3 MiB less in 4",
      /^Compare A \(step 2\) with B \(step 4\)/.test(cmp) && /-3145728 .*weights \(/.test(cmp), cmp.slice(0, 300));
    await page.selectOption("#aname", "leaks");
    await until(page, () => document.body.dataset.analysis === "leaks");
  }

  // Insight's categories for the owner tree; the lifetime chart coloured by owner
  await page.click("#topeak");
  await until(page, () => document.getElementById("ototal").textContent === "11.0 MiB");
  await page.selectOption("#omode", "category");
  await until(page, () => document.body.dataset.ownerTree.startsWith("Process_Total"));
  const cats = await page.getAttribute("body", "data-owner-tree");
  check("the owner tree by category at the peak: weight named Weight",
    cats === "Process_Total_Memory_Allocation:11534336|model:11534336|activation:8388608|Weight:3145728", cats);
  await page.selectOption("#lcolour", "owner");
  await until(page, () => document.body.dataset.lifeBlocks !== undefined);
  // the findings' links: a call site and an address of the leaks report show their blocks, a
  // step its events
  const links = Number(await page.getAttribute("#atext", "data-links"));
  check("findings: the leaks report's sites, addresses and steps are links", links >= 7, links);
  await page.click("#atext a[data-site^='weights']");
  await until(page, () => document.body.dataset.tableRows === "0:3:3");
  check("findings: weights()'s link lists its 3 blocks", true);
  await page.click("#atext a[data-addr]");
  await until(page, () => document.body.dataset.tableRows === "0:1:1");
  check("findings: an address's link lists the block there: 1.00 MiB",
    (await text("#tblocks tbody tr:first-child td:first-child")) === "1.00 MiB", await text("#tblocks tbody"));
  await page.click("#atext a[data-step='2']");
  await until(page, () => document.body.dataset.tableRows === "0:3:3" && !document.getElementById("tevents").hidden);
  const ev = await text("#tevents tbody");
  check("findings: step 2's link lists its events: 3 allocations of 1.00 MiB",
    (ev.match(/alloc1\.00 MiB/g) || []).length === 3, ev);
  await page.screenshot({ path: `${outDir}/${kind}-events.png` }); // the table in view
  check("no error in the page", errors.length === 0, errors.join(" | "));
  if (kind === "report") {
    check("the report asked the network for nothing", requests.length === 0, requests.join(" "));
    const cmd = await text("#cmd");
    check("the command line, with its </script> argument, shown as text", cmd.includes("</script><script>alert(1)</script>"), cmd);
  }
  const times = await page.evaluate(() => Object.fromEntries(
    ["first-view", "zoom", "cursor"].map((n) => [n, performance.getEntriesByName(n).map((e) => Math.round(e.duration))])));
  console.log(`times (ms): ${JSON.stringify(times)}`);
} finally {
  await browser.close();
}
console.log(`${checks - fails}/${checks} checks passed`);
process.exit(fails ? 1 : 0);
