// flame.js: flame graphs (live at the cursor, allocated in the window, never freed, the
// Python call trace) and the owner icicle.

import { $, REPORT, api, bytes, showError, state } from "./common.js";

// ---- Flame graph -------------------------------------------------------------------------------

export const ROW = 18;

// A duration in ns as s, ms or us.
export function duration(ns) {
  const a = Math.abs(ns);
  return a >= 1e9 ? (ns / 1e9).toFixed(3) + " s" : a >= 1e6 ? (ns / 1e6).toFixed(3) + " ms" : (ns / 1e3).toFixed(1) + " us";
}

export async function loadFlame() {
  const mode = $("fmode").value;
  const params = { mode };
  if (mode === "live") params.t = state.cursor;
  if (mode === "alloc" || mode === "python") { params.t0 = state.win[0]; params.t1 = state.win[1]; }
  state.flameUnit = mode === "python" ? duration : bytes;
  if (mode === "python") delete params.mode;
  if (mode === "python" && $("fthread").value !== "all") [params.pid, params.tid] = $("fthread").value.split(":");
  $("fthread").hidden = mode !== "python" || REPORT || state.sum.python_threads.length < 2;
  const r = await api(mode === "python" ? "pytrace" : "flame", params);
  // the nodes come flat in pre-order with their parent's index: the tree again
  const nodes = r.nodes.map((x) => ({ n: x.n, v: x.v }));
  r.nodes.forEach((x, i) => { if (x.p >= 0) (nodes[x.p].c ||= []).push(nodes[i]); });
  for (const x of nodes) if (x.c) x.c.sort((a, b) => b.v - a.v);
  state.flameRoot = nodes[0] || { n: "all", v: 0 };
  state.flameTop = state.flameRoot;
  $("ftotal").textContent = (mode === "python" ? `${duration(r.total)} in ${r.calls.toLocaleString("en")} calls`
    : `${bytes(r.total)} in ${r.stacks.toLocaleString("en")} stacks`) +
    (REPORT && (mode === "alloc" || mode === "python") ? " (the whole run: a report has no other window)" : "");
  drawFlame();
}

export function depthOf(n) {
  let d = 0;
  for (const c of n.c || []) d = Math.max(d, depthOf(c));
  return d + 1;
}

export let flameWidth = 0;

// The rectangles of the flame graph: [x, y, w, node], the drawn top node across the width.
export let rects = [];

// Draws tree top as an icicle on canvas cv (width w: read once by the caller), the root across
// the width, children below in proportion; returns the rectangles [x, y, w, node] drawn.
export function drawIcicle(cv, w, top, minHeight, unit = bytes, match = null) {
  const h = Math.max(minHeight, Math.min(depthOf(top), 60) * ROW + 4);
  cv.style.height = h + "px";
  cv.width = w * devicePixelRatio;
  cv.height = h * devicePixelRatio;
  const ctx = cv.getContext("2d");
  ctx.scale(devicePixelRatio, devicePixelRatio);
  ctx.font = "11px system-ui";
  ctx.textBaseline = "middle";
  const out = [];
  const total = top.v || 1;
  const walk = (n, x, y, width) => {
    if (width < 0.5 || y > h) return;
    out.push([x, y, width, n]);
    let hue = 0;
    for (let i = 0; i < n.n.length; i++) hue = (hue * 31 + n.n.charCodeAt(i)) % 360;
    ctx.fillStyle = n === top ? "#c8d2e6" : match && !match(n) ? "#e4e6ea"
      : match ? "#e040a0" : `hsl(${20 + (hue % 40)}, 75%, ${62 + (hue % 14)}%)`;
    ctx.fillRect(x, y, width - 1, ROW - 1);
    if (width > 30) { // the label cut to the box (about 6 px a character): no clip region
      ctx.fillStyle = "#1d2330";
      const label = `${n.n} (${unit(n.v)})`, fit = Math.floor((width - 6) / 6);
      ctx.fillText(label.length > fit ? label.slice(0, Math.max(0, fit - 1)) + "…" : label, x + 3, y + ROW / 2);
    }
    let cx = x;
    for (const c of n.c || []) {
      const cw = (c.v / total) * w;
      walk(c, cx, y + ROW, cw);
      cx += cw;
    }
  };
  walk(top, 0, 0, w);
  return out;
}

// The node of an icicle under the mouse, or null.
export function icicleHit(cv, list, e) {
  const r = cv.getBoundingClientRect();
  const x = e.clientX - r.left, y = e.clientY - r.top;
  for (let i = list.length - 1; i >= 0; i--) {
    const [rx, ry, rw, n] = list[i];
    if (x >= rx && x < rx + rw && y >= ry && y < ry + ROW) return n;
  }
  return null;
}

export function drawFlame() {
  const cv = $("flame");
  if (!state.flameTop) return;
  const w = flameWidth || (flameWidth = cv.clientWidth); // read once: no layout per redraw
  const q = $("fsearch").value.trim().toLowerCase();
  const match = q ? (n) => n.n.toLowerCase().includes(q) : null;
  rects = drawIcicle(cv, w, state.flameTop, 120, state.flameUnit || bytes, match);
  document.body.dataset.flameNodes = String(rects.length);
  showMatch(match);
}

// The share of the drawn top node under frames that match the search: each matching node's
// value once, the nodes below a match not again (a recursive frame counts once).
function matched(n, match) {
  if (n !== state.flameRoot && match(n)) return n.v;
  let v = 0;
  for (const c of n.c || []) v += matched(c, match);
  return v;
}

function showMatch(match) {
  const top = state.flameTop, unit = state.flameUnit || bytes;
  const v = match ? matched(top, match) : 0;
  $("fmatch").textContent = match ? `matched: ${unit(v)} (${top.v ? (100 * v / top.v).toFixed(1) : "0"}% of ${top === state.flameRoot ? "all" : top.n})` : "";
  document.body.dataset.flameMatch = match ? String(v) : "";
}

export function flameHit(e) {
  return icicleHit($("flame"), rects, e);
}

// The owner tree at the cursor: labels split at '@' ("PTA@weight", "model@layer1@activation"),
// each level a node with the bytes below it. In category mode, MindStudio Insight's names for
// the levels it knows (reference §5: PTA -> PTA_Reserved, PTA@ops -> PTA_Operator, @weight ->
// Weight, ...), at most 20 levels, and the bytes of blocks without an owner as "Other".
export let ownerRects = [], ownerWidth = 0;

// The page was resized: the flame graph and the owner icicle measure their width again.
export function flameResized() {
  flameWidth = ownerWidth = 0;
}

export const CATEGORY_PREFIX = { PTA: "PTA_Reserved", "PTA@ops": "PTA_Operator", "PTA@ops@aten": "ATEN", "PTA@model": "PTA_Model",
  PTA_WORKSPACE: "PTA_Workspace", ATB: "ATB_Reserved", MINDSPORE: "MindSpore_Reserved", "(no owner)": "Other" };
export const CATEGORY_TAG = { weight: "Weight", gradient: "Gradient", optimizer_state: "Optimizer" };

export function ownerPath(label, category) {
  const parts = label.split("@").filter(Boolean);
  if (!category) return parts;
  return parts.slice(0, 20).map((p, i) => CATEGORY_PREFIX[parts.slice(0, i + 1).join("@")] || CATEGORY_TAG[p] || p);
}

export function drawOwners(owners, total) {
  const category = $("omode").value === "category";
  const root = { n: category ? "Process_Total_Memory_Allocation" : "all", v: total, c: [] };
  let tagged = 0;
  for (const o of owners) tagged += o.bytes;
  const rows = category && total > tagged ? [...owners, { owner: "Other", bytes: total - tagged }] : owners;
  for (const o of rows) {
    let at = root;
    for (const part of ownerPath(o.owner, category)) {
      let c = at.c.find((x) => x.n === part);
      if (!c) at.c.push((c = { n: part, v: 0, c: [] }));
      c.v += o.bytes;
      at = c;
    }
  }
  const sortTree = (n) => { n.c.sort((a, b) => b.v - a.v); n.c.forEach(sortTree); };
  sortTree(root);
  const cv = $("otree");
  ownerRects = drawIcicle(cv, ownerWidth || (ownerWidth = cv.clientWidth), root, 60);
  document.body.dataset.ownerTree = ownerRects.map((r) => `${r[3].n}:${r[3].v}`).join("|");
}

export function setupFlame() {
  const cv = $("flame"), tip = $("tip");
  cv.addEventListener("mousemove", (e) => {
    const n = flameHit(e);
    if (!n) { tip.style.display = "none"; return; }
    const pct = state.flameRoot.v ? (100 * n.v / state.flameRoot.v).toFixed(1) : "0";
    tip.textContent = `${n.n}\n${(state.flameUnit || bytes)(n.v)} (${pct}% of all)`;
    tip.style.left = e.clientX + 12 + "px";
    tip.style.top = e.clientY + 12 + "px";
    tip.style.display = "block";
  });
  cv.addEventListener("mouseleave", () => { tip.style.display = "none"; });
  const ot = $("otree");
  ot.addEventListener("mousemove", (e) => {
    const n = icicleHit(ot, ownerRects, e);
    if (!n) { tip.style.display = "none"; return; }
    tip.textContent = `${n.n}\n${bytes(n.v)}`;
    tip.style.left = e.clientX + 12 + "px";
    tip.style.top = e.clientY + 12 + "px";
    tip.style.display = "block";
  });
  ot.addEventListener("mouseleave", () => { tip.style.display = "none"; });
  cv.addEventListener("click", (e) => {
    const n = flameHit(e);
    if (n) { state.flameTop = n; drawFlame(); }
  });
  $("funzoom").onclick = () => { state.flameTop = state.flameRoot; drawFlame(); };
  $("fsearch").addEventListener("input", () => drawFlame());
  $("fmode").onchange = () => loadFlame().catch(showError);
}
