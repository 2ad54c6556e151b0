// lifetimes.js: the block lifetime chart: the largest blocks of the window placed at the
// lowest free offset, coloured by site or owner, inefficient ones outlined.

import { $, LIFE_BLOCKS, REPORT, bytes, ineffNames, rel, showError, state, timedSync } from "./common.js";
import { duration } from "./flame.js";
import { showStack } from "./stack.js";
import { largestAlive, tableWhenSeen } from "./table.js";

// ---- Block lifetimes ---------------------------------------------------------------------------

export let lifeRects = []; // [x, y, w, h, block]

export function siteColour(site) {
  let h = 0;
  for (let i = 0; i < site.length; i++) h = (h * 31 + site.charCodeAt(i)) >>> 0;
  return `hsl(${h % 360}, 55%, ${55 + (h >> 9) % 20}%)`;
}

export async function loadLifetimes() {
  const [t0, t1] = state.win;
  const r = REPORT ? reportLifetimes(t0, t1) : await largestAlive(t0, t1);
  drawLifetimes(r.blocks, t0, t1);
  const flagged = r.blocks.filter((b) => b.ineff).length;
  $("lhint").textContent = (REPORT ? `${r.blocks.length.toLocaleString("en")} of the run's ${LIFE_BLOCKS} largest blocks alive in the window (a report keeps no others), `
    : `the ${r.blocks.length.toLocaleString("en")} largest of ${r.count.toLocaleString("en")} blocks alive in the window, `) +
    "each from its allocation to its free, stacked as they fit; click one for its stack";
  if (state.sum.accessed_blocks) $("ihint").textContent = ` ${flagged} of the blocks drawn are inefficient`;
  document.body.dataset.lifeIneff = String(flagged);
}

// A report carries the largest blocks of the whole run: those alive in the window.
export function reportLifetimes(t0, t1) {
  const all = REPORT.lifetimes.blocks;
  const blocks = all.filter((b) => b.alloc_ns < t1 && (b.free_ns === null || b.free_ns > t0));
  return { count: blocks.length, blocks };
}

// Places the blocks (largest first in the answer) in allocation order at the lowest offset
// where no block alive at the same time sits: a picture of the live bytes they make up.
export function placeBlocks(blocks) {
  const order = blocks.map((b, i) => i).sort((a, b) => blocks[a].alloc_ns - blocks[b].alloc_ns);
  const active = []; // {lo, hi, end}
  const at = new Array(blocks.length);
  let top = 0;
  for (const i of order) {
    const b = blocks[i], end = b.free_ns === null ? Infinity : b.free_ns;
    for (let k = active.length - 1; k >= 0; k--) if (active[k].end <= b.alloc_ns) active.splice(k, 1);
    active.sort((x, y) => x.lo - y.lo);
    let lo = 0;
    for (const a of active) {
      if (a.lo - lo >= b.size) break;
      lo = Math.max(lo, a.hi);
    }
    active.push({ lo, hi: lo + b.size, end });
    at[i] = lo;
    top = Math.max(top, lo + b.size);
  }
  return { at, top };
}

export function drawLifetimes(blocks, t0, t1) {
  const cv = $("life");
  const w = cv.clientWidth, h = 260;
  cv.width = w * devicePixelRatio;
  cv.height = h * devicePixelRatio;
  const ctx = cv.getContext("2d");
  ctx.scale(devicePixelRatio, devicePixelRatio);
  ctx.clearRect(0, 0, w, h);
  const { at, top } = timedSync("lifetimes:place", () => placeBlocks(blocks));
  const byOwner = $("lcolour").value === "owner";
  const left = 80, span = Math.max(1, t1 - t0), ys = top ? (h - 16) / top : 0;
  ctx.font = "10px system-ui";
  ctx.fillStyle = "#6b7385";
  ctx.fillText(bytes(top), 4, 10);
  ctx.fillText("0 B", 4, h - 4);
  lifeRects = [];
  blocks.forEach((b, i) => {
    const a = Math.max(b.alloc_ns, t0), e = b.free_ns === null ? t1 : Math.min(b.free_ns, t1);
    const x = left + ((a - t0) / span) * (w - left), x2 = left + ((e - t0) / span) * (w - left);
    const y = h - 2 - (at[i] + b.size) * ys, bh = Math.max(1, b.size * ys);
    ctx.fillStyle = siteColour(byOwner ? b.owner || "(no owner)" : b.site);
    ctx.fillRect(x, y, Math.max(1, x2 - x), bh);
    lifeRects.push([x, y, Math.max(1, x2 - x), bh, b]);
  });
  ctx.strokeStyle = "#d0021b";
  ctx.lineWidth = 2;
  for (const [x, y, rw, rh, b] of lifeRects) if (b.ineff) ctx.strokeRect(x + 1, y + 1, Math.max(1, rw - 2), Math.max(1, rh - 2));
  document.body.dataset.lifeBlocks = String(blocks.length);
}

export function setupLifetimes() {
  const cv = $("life"), tip = $("tip");
  $("lcolour").onchange = () => loadLifetimes().catch(showError);
  if (state.sum.accessed_blocks) {
    $("ineff").hidden = false;
    $("tineff").hidden = false;
    if (REPORT) for (const i of $("ineff").querySelectorAll("input, button")) i.disabled = true; // answers precomputed at 50%
  }
  $("ineff").onsubmit = (e) => {
    e.preventDefault();
    const f = new FormData($("ineff"));
    state.th = {};
    for (const k of ["lazy", "delayed", "idle"]) state.th[k] = String(f.get(k)).trim();
    Promise.all([loadLifetimes(), tableWhenSeen()]).catch(showError);
  };
  const hit = (e) => {
    const r = cv.getBoundingClientRect(), x = e.clientX - r.left, y = e.clientY - r.top;
    for (const [rx, ry, rw, rh, b] of lifeRects) if (x >= rx && x < rx + rw && y >= ry && y < ry + rh) return b;
    return null;
  };
  cv.addEventListener("mousemove", (e) => {
    const b = hit(e);
    if (!b) { tip.style.display = "none"; return; }
    tip.textContent = `${bytes(b.size)} ${b.owner ? "(" + b.owner + ") " : ""}from ${rel(b.alloc_ns)} to ${rel(b.free_ns)}\n${b.site}` +
      (b.access ? `\naccessed first at ${rel(b.access.first_ns)}, last at ${rel(b.access.last_ns)}, longest idle ${duration(b.access.max_gap_ns)}` : "") +
      (b.ineff ? `\ninefficient: ${ineffNames(b.ineff)}` : "");
    tip.style.left = e.clientX + 12 + "px";
    tip.style.top = e.clientY + 12 + "px";
    tip.style.display = "block";
  });
  cv.addEventListener("mouseleave", () => { tip.style.display = "none"; });
  cv.addEventListener("click", (e) => {
    const b = hit(e);
    if (b) showStack(b.stack_id, `${bytes(b.size)} block, allocated at ${rel(b.alloc_ns)}, freed ${b.free_ns === null ? "never" : "at " + rel(b.free_ns)}`);
  });
}
