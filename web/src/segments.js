// segments.js: a pool's allocator state at the cursor: its regions and the blocks in them,
// stepping through the pool's events.

import { $, api, bytes, el, rel, showError, state } from "./common.js";
import { ask } from "./events.js";
import { siteColour } from "./lifetimes.js";
import { showStack } from "./stack.js";

// ---- Allocator state: a pool's regions and its blocks in them ---------------------------------

export const SEG_ROW = 16, SEG_LABEL = 360;
export let segRects = [], segWidth = 0;

// The page was resized: the allocator state measures its width again.
export function segmentsResized() {
  segWidth = 0;
}

export async function loadSegments() {
  if (!state.sum.pools.length) return;
  const r = await api("segments", { pool: $("pool").value, t: state.cursor });
  state.segments = r;
  $("shint").textContent = `${r.pool} at ${rel(r.t)}: ${r.segment_count} regions, ${bytes(r.reserved_bytes)} reserved, ` +
    `${bytes(r.used_bytes)} in ${r.block_count} blocks` + (r.truncated ? " (drawn: the first 500 regions, 5000 blocks)" : "");
  $("sprev").disabled = r.prev_t === null;
  $("snext").disabled = r.next_t === null;
  drawSegments(r);
  document.body.dataset.segments = r.segments.map((g) => `${g.size}:${g.blocks.map((b) => `${b.offset}+${b.size}`).join(",")}:${g.largest_free}`).join("|");
}

export function drawSegments(r) {
  const cv = $("segs");
  const w = segWidth || (segWidth = cv.clientWidth);
  const h = Math.max(SEG_ROW, r.segments.length * SEG_ROW);
  cv.style.height = h + "px";
  cv.width = w * devicePixelRatio;
  cv.height = h * devicePixelRatio;
  const ctx = cv.getContext("2d");
  ctx.scale(devicePixelRatio, devicePixelRatio);
  ctx.font = "11px system-ui";
  ctx.textBaseline = "middle";
  const biggest = Math.max(1, ...r.segments.map((g) => g.size));
  const scale = (w - SEG_LABEL - 4) / biggest;
  segRects = [];
  r.segments.forEach((g, i) => {
    const y = i * SEG_ROW;
    ctx.save();
    ctx.beginPath(); ctx.rect(0, y, SEG_LABEL - 6, SEG_ROW); ctx.clip();
    ctx.fillStyle = "#1d2330";
    ctx.fillText(`${g.addr} ${bytes(g.size)}: used ${bytes(g.used_bytes)}, free <= ${bytes(g.largest_free)}`, 2, y + SEG_ROW / 2);
    ctx.restore();
    ctx.fillStyle = "#e4e7ee";
    ctx.fillRect(SEG_LABEL, y + 1, g.size * scale, SEG_ROW - 2);
    for (const b of g.blocks) {
      const x = SEG_LABEL + b.offset * scale, bw = Math.max(1, b.size * scale);
      ctx.fillStyle = siteColour(String(b.stack_id)); // by stack: a region's blocks carry no site
      ctx.fillRect(x, y + 1, bw, SEG_ROW - 2);
      segRects.push([x, y, bw, SEG_ROW, b, g]);
    }
  });
}

export function setupSegments() {
  if (!state.sum.pools.length) return;
  $("allocsec").hidden = false;
  const sel = $("pool");
  state.sum.pools.forEach((name, i) => sel.append(el("option", { value: String(i) }, name)));
  sel.onchange = () => loadSegments().catch(showError);
  const step = (dir) => {
    const r = state.segments;
    if (!r) return;
    const t = dir < 0 ? r.prev_t : r.next_t;
    if (t !== null) ask("setCursor", t).catch(showError);
  };
  $("sprev").onclick = () => step(-1);
  $("snext").onclick = () => step(1);
  const cv = $("segs"), tip = $("tip");
  const hit = (e) => {
    const rc = cv.getBoundingClientRect(), x = e.clientX - rc.left, y = e.clientY - rc.top;
    return segRects.find(([rx, ry, rw, rh]) => x >= rx && x < rx + rw && y >= ry && y < ry + rh);
  };
  cv.addEventListener("mousemove", (e) => {
    const f = hit(e);
    if (!f) { tip.style.display = "none"; return; }
    const [, , , , b, g] = f;
    tip.textContent = `${bytes(b.size)} at ${g.addr} + ${b.offset}${b.owner ? " (" + b.owner + ")" : ""}, allocated at ${rel(b.alloc_ns)}\nclick for its stack`;
    tip.style.left = e.clientX + 12 + "px";
    tip.style.top = e.clientY + 12 + "px";
    tip.style.display = "block";
  });
  cv.addEventListener("mouseleave", () => { tip.style.display = "none"; });
  cv.addEventListener("click", (e) => {
    const f = hit(e);
    if (f) showStack(f[4].stack_id, `${bytes(f[4].size)} block at ${f[5].addr} + ${f[4].offset}, allocated at ${rel(f[4].alloc_ns)}`);
  });
}
