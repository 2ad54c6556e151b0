// view_hostile.mjs: Debian's chromium (playwright-core) on view_hostile.c's run, whose thread,
// owner, mark, range, pool and command line are the HTML of process.argv[3]: the page served
// by memscope view (process.argv[2] = its URL, process.argv[4] = "view") or memscope report's
// file (a file:// URL, "report") becomes ready, shows the command line as text, opens no
// dialog and reports no error. Served, it also sets no cookie, asks for everything with the
// token, and a reload (the URL keeps the token) shows the page again.
import { createRequire } from "node:module";
const require = createRequire(process.env.WEB + "/package.json");
const { chromium } = require("playwright-core");

const [url, hostile, kind] = process.argv.slice(2);
let fails = 0, checks = 0;
const check = (what, ok, got) => {
  checks++;
  if (ok) console.log(`ok: ${what}`);
  else { fails++; console.log(`FAIL: ${what}: got [${got}]`); }
};

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
try {
  const context = await browser.newContext();
  const page = await context.newPage();
  const errors = [], requests = [];
  page.on("request", (r) => { if (!r.url().startsWith("file:") && !r.url().startsWith("data:")) requests.push(r.url()); });
  page.on("dialog", (d) => { errors.push(`a dialog opened: ${d.message()}`); d.dismiss(); });
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  const ready = async (what) => {
    try {
      await page.waitForSelector("body[data-ready='1']", { timeout: 30000 });
      check(`${what}: the page is ready`, true);
    } catch (e) {
      check(`${what}: the page is ready`, false, `${e.message.split("\n")[0]}; body: ${(await page.textContent("body")).slice(0, 200)}`);
    }
  };
  await page.goto(url);
  await ready(kind);
  const cmd = (await page.textContent("#cmd")).trim();
  check(`${kind}: the command line shown as text`, cmd.includes(hostile), cmd);
  if (kind === "view") {
    const token = new URL(url).searchParams.get("token");
    const without = requests.filter((r) => new URL(r).searchParams.get("token") !== token);
    check("every request carries the token", requests.length > 3 && without.length === 0,
      `${requests.length} requests, without: ${without.join(" ")}`);
    check("no cookie set", (await context.cookies()).length === 0, JSON.stringify(await context.cookies()));
    await page.evaluate(() => { document.body.dataset.ready = ""; });
    await page.reload();
    await ready("view, reloaded");
    check("no cookie after the reload", (await context.cookies()).length === 0, JSON.stringify(await context.cookies()));
  } else {
    check("the report asked the network for nothing", requests.length === 0, requests.join(" "));
  }
  check(`${kind}: no dialog, no error in the page`, errors.length === 0, errors.join(" | "));
} finally {
  await browser.close();
}
console.log(`${checks - fails}/${checks} checks passed`);
process.exit(fails ? 1 : 0);
