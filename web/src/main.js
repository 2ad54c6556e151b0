// main.js: memscope's viewer page. Asks the server (src/view/api.c) for aggregated answers
// only (a few thousand points or rows each), or reads them from the page itself in a report
// file (window.MEMSCOPE_REPORT, src/view/report.c), and draws them: memory over time (uPlot),
// the block lifetime chart, flame graphs of allocation stacks and of the Python call trace, the
// largest blocks and the owner tree at the time cursor, a pool's allocator state, the Blocks
// table and the analyses' findings. Every view follows the cursor and the zoom window;
// performance measures time the first view, each zoom and each cursor move.
import uPlot from "uplot";

const token = new URLSearchParams(location.search).get("token") || "";
const $ = (id) => document.getElementById(id);

const state = {
  sum: null,          // /api/summary
  win: null,          // [t0, t1): the zoom window
  cursor: null,       // ns
  flameRoot: null,    // the tree from /api/flame
  flameTop: null,     // the node drawn as the whole width (click to zoom in)
  flameUnit: null,    // how the flame's values read: bytes, or a duration (Python call trace)
  segments: null,     // the last /api/segments answer (stepping through a pool's events)
  th: {},             // the thresholds of inefficient blocks (lazy, delayed, idle) when set
};

const INEFF = ["lazy used", "delayed free", "long idle"]; // the bits of a block's "ineff"
const ineffNames = (f) => INEFF.filter((_, i) => f & (1 << i)).join(", ");

// A report file (memscope report) carries its answers: no server to ask.
const REPORT = window.MEMSCOPE_REPORT || null;

// The precomputed time of the report nearest to t.
function nearestTime(t) {
  const ts = REPORT.times;
  let lo = 0, hi = ts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (ts[mid] < t) lo = mid + 1; else hi = mid;
  }
  return lo > 0 && t - ts[lo - 1] < ts[lo] - t ? ts[lo - 1] : ts[lo];
}

// The report's answer to a query, as the server would give it.
function reportAnswer(path, p) {
  switch (path) {
    case "summary": return REPORT.summary;
    case "series": {
      const s = REPORT.series;
      const keep = s.t.map((t) => t >= Number(p.t0) && t < Number(p.t1));
      if (!keep.some(Boolean)) keep[Math.max(0, s.t.findIndex((t) => t >= Number(p.t0)) - 1)] = true;
      const pick = (a) => a.filter((_, i) => keep[i]);
      return { t0: p.t0, t1: p.t1, t: pick(s.t), tracks: s.tracks.map((tr) => ({ id: tr.id, min: pick(tr.min), max: pick(tr.max) })) };
    }
    case "blocks": return REPORT.at[String(p.t)].blocks;
    case "owners": return REPORT.at[String(p.t)].owners;
    case "segments": {
      const a = REPORT.at[String(p.t)];
      if (!a.segments) throw new Error("no allocator state at this time in the report");
      // stepping goes through the pool's events the report kept (else through all its times)
      const ts = REPORT.pool_times.length ? REPORT.pool_times : REPORT.times, t = Number(p.t);
      const prev = ts.filter((x) => x < t), next = ts.filter((x) => x > t);
      return { ...a.segments, prev_t: prev.length ? prev[prev.length - 1] : null, next_t: next.length ? next[0] : null };
    }
    case "ranges": { // the whole run's: those overlapping the window
      const keep = REPORT.ranges.ranges.filter((g) => g.start_ns < Number(p.t1) && (g.end_ns === null || g.end_ns > Number(p.t0)));
      return { count: keep.length, ranges: keep };
    }
    case "pytrace":
      if (!REPORT.pytrace) throw new Error("no Python call trace in this report");
      return REPORT.pytrace;
    case "flame":
      if (p.mode === "alloc") return REPORT.flame_alloc;
      if (p.mode === "leaked") return REPORT.flame_leaked;
      return REPORT.at[String(p.t)].flame;
    case "analyses": return { analyses: REPORT.analyses.map((a) => ({ name: a.name, summary: a.summary })) };
    case "analysis": {
      const a = REPORT.analyses.find((x) => x.name === p.name);
      return { name: p.name, text: a ? a.text : "(not in this report)" };
    }
    case "stack":
      return REPORT.stacks[String(p.id)] || { id: p.id, c: ["(this stack is not in the report)"], py: [] };
  }
  throw new Error(`no ${path} in this report`);
}

// The last answers, by query: a run never changes while it is viewed, so going back to a
// window or a time (the whole run after a zoom, the peak) asks the server nothing.
const answers = new Map();
const pending = new Map(); // the answers on their way, by query
const ANSWERS = 32;

function answerKey(path, params) {
  const q = new URLSearchParams(params);
  if (token) q.set("token", token);
  return `${path}?${q}`;
}

// Keeps an answer got another way (a part of /api/at) as the answer to path with params.
function keepAnswer(path, params, body) {
  answers.set(answerKey(path, params), body);
  if (answers.size > ANSWERS) answers.delete(answers.keys().next().value);
}

async function api(path, params = {}) {
  if (REPORT) return reportAnswer(path, params);
  const key = answerKey(path, params);
  if (answers.has(key)) {
    const body = answers.get(key);
    answers.delete(key); // most recent last
    answers.set(key, body);
    return body;
  }
  if (pending.has(key)) return pending.get(key); // asked already: the same answer
  const ask = (async () => {
    const r = await fetch(`/api/${key}`, { credentials: "same-origin" });
    const body = await r.json();
    if (!r.ok) throw new Error(body.error || `HTTP ${r.status}`);
    answers.set(key, body);
    if (answers.size > ANSWERS) answers.delete(answers.keys().next().value);
    return body;
  })();
  pending.set(key, ask);
  try { return await ask; } finally { pending.delete(key); }
}

export function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = Math.abs(n), u = 0;
  while (v >= 1024 && u < units.length - 1) { v /= 1024; u++; }
  const s = u === 0 ? String(v) : v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0);
  return (n < 0 ? "-" : "") + s + " " + units[u];
}

// An axis tick: seconds shown in s, ms or us, with the digits that tell ticks apart.
function seconds(v) {
  const a = Math.abs(v);
  if (a === 0) return "0";
  if (a >= 1) return +v.toFixed(3) + " s";
  if (a >= 1e-3) return +(v * 1e3).toFixed(3) + " ms";
  return +(v * 1e6).toFixed(3) + " us";
}

function rel(ns) {
  if (ns === null || ns === undefined) return "never";
  const s = (ns - state.sum.t0) / 1e9;
  return Math.abs(s) >= 1 ? s.toFixed(3) + " s" : (s * 1e3).toFixed(3) + " ms";
}

function el(tag, attrs = {}, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function showError(e) {
  $("err").textContent = String(e.message || e);
}

// ---- Summary ---------------------------------------------------------------------------------

function renderSummary() {
  const s = state.sum;
  let cmd = s.command;
  try { cmd = JSON.parse(s.command).join(" "); } catch (_) { /* not a JSON array */ }
  $("cmd").textContent = cmd;
  const stats = $("stats");
  stats.textContent = "";
  const add = (label, value, id) => {
    const span = el("span", { class: "stat" });
    span.append(label + " ");
    const b = el("b", id ? { id } : {}, value);
    span.append(b);
    stats.append(span);
  };
  add("peak", bytes(s.peak_bytes), "peak");
  add("at", rel(s.peak_ns));
  add("events", s.events.toLocaleString("en"));
  add("blocks", s.blocks.toLocaleString("en"));
  add("never freed", `${bytes(s.leaked_bytes)} in ${s.leaked_blocks} blocks`, "leaked");
  add("steps", String(new Set(s.steps.map((x) => x.step)).size));
  for (const w of s.warnings || []) {
    const div = el("div", { class: "warning" }, "warning: " + w);
    stats.append(div);
  }
  const sites = (id, rows) => {
    const tb = $(id).tBodies[0];
    tb.textContent = "";
    for (const r of rows) {
      const tr = el("tr", { class: "row" });
      tr.append(el("td", { class: "num" }, bytes(r.bytes)), el("td", { class: "site", title: r.site }, r.site));
      tr.onclick = () => showStack(r.stack_id, r.site);
      tb.append(tr);
    }
    if (!rows.length) {
      const tr = el("tr");
      tr.append(el("td", {}, "none"));
      tb.append(tr);
    }
  };
  sites("peaksites", s.peak_sites);
  sites("leaksites", s.leak_sites);
}

// ---- Memory over time ------------------------------------------------------------------------

let plot = null;
let seriesReq = 0;

function chartWidth() {
  return Math.max(400, $("chart").clientWidth || document.body.clientWidth - 60);
}

function seriesPoints() {
  return Math.min(2000, chartWidth());
}

// One request for what a zoom asks (/api/window: the series and the largest blocks alive in
// [t0, t1)), kept as the answers to their own queries.
async function prefetchWindow(t0, t1) {
  const n = seriesPoints(), life = { t0, t1, limit: LIFE_BLOCKS, sites: "map", ...state.th };
  if (answers.has(answerKey("series", { t0, t1, n })) && answers.has(answerKey("blocks", life))) return;
  const p = { t0, t1, n, limit: LIFE_BLOCKS, sites: "map", ...state.th };
  if (state.sum.ranges) p.ranges = 1;
  const [series, blocks, ranges] = await api("window", p);
  keepAnswer("series", { t0, t1, n }, series);
  keepAnswer("blocks", life, blocks);
  if (ranges) keepAnswer("ranges", { t0, t1, n }, ranges);
}

function trackLabel(t) {
  return t.id === 0 ? "all memory" : `pid ${t.pid} ${t.layer_name}`;
}

const palette = ["#1d2330", "#3d6fd8", "#e07b39", "#2e9e6b", "#c0392b", "#8e44ad", "#16a085", "#7f8c8d"];

async function loadSeries() {
  const my = ++seriesReq;
  const [t0, t1] = state.win;
  const n = seriesPoints();
  const [r, ranges] = await Promise.all([api("series", { t0, t1, n }), state.sum.ranges ? api("ranges", { t0, t1, n }) : null]);
  if (my !== seriesReq) return; // a newer window was asked for meanwhile
  state.ranges = ranges ? ranges.ranges : [];
  const tracks = state.sum.tracks;
  const xs = r.t.map((t) => (t - state.sum.t0) / 1e9);
  const data = [xs];
  const series = [{ label: "time (s)" }];
  const memory = tracks.filter((t) => t.id > 0 && !t.reserve).length;
  // stacked: each memory layer of each process on top of the ones before it (the maxima of each
  // pixel's interval added up); split: each on its own, with their total
  const stacked = $("smode").value === "stacked" && memory > 1;
  const sum = new Array(xs.length).fill(0);
  r.tracks.forEach((tr, i) => {
    const meta = tracks[tr.id];
    if (memory === 1 && tr.id > 0 && !meta.reserve) return; // one layer only: "all" says it
    if (stacked && tr.id === 0) return; // the stack's top is the total
    const colour = palette[i % palette.length];
    let values = tr.max, label = trackLabel(meta) + (meta.reserve ? " (reserved)" : "");
    if (stacked && !meta.reserve) {
      values = tr.max.map((v, k) => (sum[k] += v ?? 0));
      label += " (stacked)";
    }
    data.push(values);
    series.push({ label, stroke: colour, width: tr.id === 0 ? 2 : 1, dash: meta.reserve ? [6, 4] : undefined,
      fill: tr.id === 0 ? "rgba(61,111,216,0.08)" : stacked && !meta.reserve ? colour + "30" : undefined,
      value: (u, v) => (v == null ? "" : bytes(v)) });
  });
  if (stacked) { // drawn top first, so that each fill covers only its own band
    const order = data.slice(1).map((_, k) => k + 1).reverse();
    data.splice(1, data.length - 1, ...order.map((k) => data[k]));
    series.splice(1, series.length - 1, ...order.map((k) => series[k]));
  }
  document.body.dataset.seriesLabels = series.slice(1).map((x) => x.label).join("|");
  const opts = {
    width: chartWidth(), height: 280,
    series,
    scales: { x: { time: false } },
    axes: [{ label: "time from the first event", values: (u, vals) => vals.map(seconds) },
      { values: (u, vals) => vals.map(bytes), size: 80 }],
    cursor: { drag: { x: true, y: false } },
    hooks: {
      setSelect: [(u) => {
        if (u.select.width < 3) return;
        const a = u.posToVal(u.select.left, "x"), b = u.posToVal(u.select.left + u.select.width, "x");
        u.setSelect({ width: 0, height: 0 }, false);
        zoomTo(state.sum.t0 + a * 1e9, state.sum.t0 + b * 1e9).catch(showError);
      }],
      draw: [drawMarks],
    },
  };
  if (plot && plot.series.length === series.length && plot.stacked === stacked) {
    plot.setData(data); // the same series over a new window: no new chart
    return;
  }
  if (plot) plot.destroy();
  plot = new uPlot(opts, data, $("chart"));
  plot.stacked = stacked;
  plot.over.addEventListener("click", (e) => {
    if (plot.select.width > 2 || e.detail > 1) return; // a drag, or a double-click's second click
    const x = plot.posToVal(e.offsetX, "x");
    setCursor(Math.round(state.sum.t0 + x * 1e9));
  });
  plot.over.addEventListener("dblclick", () => zoomTo(state.sum.t0, state.sum.t1 + 1, "zoom-reset").catch(showError));
}

function drawMarks(u) {
  const ctx = u.ctx;
  const top = u.bbox.top, h = u.bbox.height;
  const xpos = (ns) => u.valToPos((ns - state.sum.t0) / 1e9, "x", true);
  ctx.save();
  ctx.setLineDash([4, 4]);
  ctx.strokeStyle = "#9aa3b5";
  ctx.fillStyle = "#6b7385";
  ctx.font = `${10 * devicePixelRatio}px system-ui`;
  const steps = state.sum.steps.filter((s) => s.ts_ns >= state.win[0] && s.ts_ns < state.win[1]);
  const every = Math.max(1, Math.ceil(steps.length / 60));
  steps.forEach((s, i) => {
    if (i % every) return;
    const x = xpos(s.ts_ns);
    ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + h); ctx.stroke();
    ctx.fillText(`step ${s.step}`, x + 2, top + 10 * devicePixelRatio);
  });
  // marks: a dotted purple line with the mark's text at the bottom
  ctx.setLineDash([2, 3]);
  ctx.strokeStyle = "#8e44ad";
  ctx.fillStyle = "#8e44ad";
  const marks = state.sum.marks.filter((m) => m.ts_ns >= state.win[0] && m.ts_ns < state.win[1]);
  const everyMark = Math.max(1, Math.ceil(marks.length / 40));
  marks.forEach((m, i) => {
    if (i % everyMark) return;
    const x = xpos(m.ts_ns);
    ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + h); ctx.stroke();
    ctx.fillText(m.name, x + 2, top + h - 4 * devicePixelRatio);
  });
  ctx.setLineDash([]);
  // ranges (memscope_range_push .. pop, NVTX): bands along the top, a row per nesting depth
  const row = 12 * devicePixelRatio;
  ctx.font = `${9 * devicePixelRatio}px system-ui`;
  for (const g of state.ranges || []) {
    if (g.depth > 3) continue;
    const x0 = Math.max(u.bbox.left, xpos(g.start_ns));
    const x1 = Math.min(u.bbox.left + u.bbox.width, xpos(g.end_ns === null ? state.sum.t1 : g.end_ns));
    const y = top + 14 * devicePixelRatio + g.depth * row;
    ctx.fillStyle = "rgba(142, 68, 173, 0.16)";
    ctx.fillRect(x0, y, Math.max(1, x1 - x0), row - 2);
    if (x1 - x0 > 30 * devicePixelRatio) {
      ctx.fillStyle = "#5b2c6f";
      ctx.fillText(g.name, x0 + 2, y + row - 4 * devicePixelRatio, x1 - x0 - 4);
    }
  }
  document.body.dataset.ranges = (state.ranges || []).map((g) => `${g.name}@${g.depth}`).join("|");
  document.body.dataset.marks = marks.map((m) => m.name).join("|");
  if (state.cursor !== null && state.cursor >= state.win[0] && state.cursor < state.win[1]) {
    const x = xpos(state.cursor);
    ctx.strokeStyle = "#c0392b";
    ctx.lineWidth = 2;
    ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + h); ctx.stroke();
  }
  ctx.restore();
}

// Resolves once the browser has painted what the page changed: the next frame's callback, then
// the task after it (the paint happens between them). The measures end here.
function painted() {
  return new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
}

// Runs fn, recording its duration as the performance measure name (the benchmark reads them).
function timedSync(name, fn) {
  const t0 = performance.now();
  try { return fn(); } finally { performance.measure(name, { start: t0, end: performance.now() }); }
}

async function timed(name, fn) {
  const t0 = performance.now();
  try { return await fn(); } finally { performance.measure(name, { start: t0, end: performance.now() }); }
}

// Shows window [a, b) in every view; the time it takes is the performance measure name.
async function zoomTo(a, b, name = "zoom") {
  state.win = [Math.floor(a), Math.max(Math.ceil(b), Math.floor(a) + 1)];
  performance.mark("zoom-start");
  const byWindow = new FormData($("tform")).get("scope") === "window";
  if (byWindow) tableOffset = 0;
  if (!REPORT) await timed("zoom:window", () => prefetchWindow(state.win[0], state.win[1]));
  await Promise.all([timed("zoom:series", loadSeries), timed("zoom:lifetimes", loadLifetimes),
    ["alloc", "python"].includes($("fmode").value) ? timed("zoom:flame", loadFlame) : null,
    byWindow ? timed("zoom:table", tableWhenSeen) : null]);
  await painted();
  performance.mark("zoom-end");
  performance.measure(name, "zoom-start", "zoom-end");
  document.body.dataset.window = state.win.join(",");
}

// Moves the window by share of its width, its width kept, within the run.
function pan(share) {
  const [a, b] = state.win, w = b - a;
  const lo = state.sum.t0, hi = state.sum.t1 + 1;
  let na = Math.round(a + share * w);
  na = Math.max(lo, Math.min(na, hi - w));
  if (na === a) return Promise.resolve(); // at the run's edge already
  return zoomTo(na, na + w, "pan");
}

// ---- Cursor-driven views ----------------------------------------------------------------------

async function setCursor(t, name = "cursor") {
  if (REPORT) t = nearestTime(t); // a report has its answers at a set of times
  state.cursor = t;
  $("cursor").textContent = `cursor at ${rel(t)}${REPORT ? " (the report's nearest time)" : ""}`;
  if (plot) plot.redraw(false);
  performance.mark("cursor-start");
  const byCursor = new FormData($("tform")).get("scope") === "cursor";
  if (byCursor) tableOffset = 0;
  if (!REPORT) await timed("cursor:at", () => prefetchAt(t));
  await Promise.all([timed("cursor:blocks", loadBlocks), timed("cursor:owners", loadOwners),
    $("fmode").value === "live" ? timed("cursor:flame", loadFlame) : null,
    byCursor ? timed("cursor:table", tableWhenSeen) : null, timed("cursor:segments", loadSegments)]);
  await painted();
  performance.mark("cursor-end");
  performance.measure(name, "cursor-start", "cursor-end");
  document.body.dataset.cursor = String(t);
}

// One request for what the views below ask at time t (/api/at: the blocks, owners, live flame
// graph and allocator state there), kept as the answers to their own queries: a browser's round
// trip costs more than the server's answers.
async function prefetchAt(t) {
  const live = $("fmode").value === "live", pool = state.sum.pools.length ? $("pool").value : null;
  const p = { t, limit: 50 };
  if (live) p.mode = "live";
  if (pool !== null) p.pool = pool;
  if (answers.has(answerKey("blocks", { t, limit: 50 }))) return;
  const [blocks, owners, flame, segments] = await api("at", p);
  keepAnswer("blocks", { t, limit: 50 }, blocks);
  keepAnswer("owners", { t }, owners);
  if (live) keepAnswer("flame", { mode: "live", t }, flame);
  if (pool !== null) keepAnswer("segments", { pool, t }, segments);
}

async function loadBlocks() {
  const r = await api("blocks", { t: state.cursor, limit: 50 });
  $("bcount").textContent = `${r.count.toLocaleString("en")} live, ${bytes(r.bytes)}`;
  const tb = $("blocks").tBodies[0];
  tb.textContent = "";
  for (const b of r.blocks) {
    const tr = el("tr", { class: "row", "data-stack": b.stack_id });
    tr.append(el("td", { class: "num" }, bytes(b.size)), el("td", { class: "site", title: b.site }, b.site),
      el("td", {}, b.owner || ""), el("td", { class: "num" }, rel(b.alloc_ns)), el("td", { class: "num" }, rel(b.free_ns)));
    tr.onclick = () => {
      for (const x of tb.querySelectorAll("tr.sel")) x.classList.remove("sel");
      tr.classList.add("sel");
      showStack(b.stack_id, `${bytes(b.size)} block, allocated at ${rel(b.alloc_ns)}, freed ${b.free_ns === null ? "never" : "at " + rel(b.free_ns)}`);
    };
    tb.append(tr);
  }
}

async function showStack(id, title) {
  const r = await api("stack", { id });
  const lines = [title, ""];
  if (r.py.length) lines.push("Python (innermost first):", ...r.py.map((l) => "  " + l), "");
  lines.push("native (innermost first):", ...(r.c.length ? r.c.map((l) => "  " + l) : ["  (no stack)"]));
  $("stack").textContent = lines.join("\n");
}

async function loadOwners() {
  const r = await api("owners", { t: state.cursor }); // cached: a change of mode asks nothing
  $("ototal").textContent = bytes(r.total);
  drawOwners(r.owners, r.total);
  const tb = $("owners").tBodies[0];
  tb.textContent = "";
  for (const o of r.owners.slice(0, 50)) { // the tree above shows them all
    const tr = el("tr");
    tr.append(el("td", { class: "site" }, o.owner), el("td", { class: "num" }, bytes(o.bytes)), el("td", { class: "num" }, String(o.blocks)));
    tb.append(tr);
  }
}

// ---- Block lifetimes ---------------------------------------------------------------------------

const LIFE_BLOCKS = 2000;
let lifeRects = []; // [x, y, w, h, block]

function siteColour(site) {
  let h = 0;
  for (let i = 0; i < site.length; i++) h = (h * 31 + site.charCodeAt(i)) >>> 0;
  return `hsl(${h % 360}, 55%, ${55 + (h >> 9) % 20}%)`;
}

async function loadLifetimes() {
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
function reportLifetimes(t0, t1) {
  const all = REPORT.lifetimes.blocks;
  const blocks = all.filter((b) => b.alloc_ns < t1 && (b.free_ns === null || b.free_ns > t0));
  return { count: blocks.length, blocks };
}

// Places the blocks (largest first in the answer) in allocation order at the lowest offset
// where no block alive at the same time sits: a picture of the live bytes they make up.
function placeBlocks(blocks) {
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

function drawLifetimes(blocks, t0, t1) {
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

function setupLifetimes() {
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

// ---- Flame graph -------------------------------------------------------------------------------

const ROW = 18;

// A duration in ns as s, ms or us.
function duration(ns) {
  const a = Math.abs(ns);
  return a >= 1e9 ? (ns / 1e9).toFixed(3) + " s" : a >= 1e6 ? (ns / 1e6).toFixed(3) + " ms" : (ns / 1e3).toFixed(1) + " us";
}

async function loadFlame() {
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

function depthOf(n) {
  let d = 0;
  for (const c of n.c || []) d = Math.max(d, depthOf(c));
  return d + 1;
}

let flameWidth = 0;

// The rectangles of the flame graph: [x, y, w, node], the drawn top node across the width.
let rects = [];

// Draws tree top as an icicle on canvas cv (width w: read once by the caller), the root across
// the width, children below in proportion; returns the rectangles [x, y, w, node] drawn.
function drawIcicle(cv, w, top, minHeight, unit = bytes) {
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
    ctx.fillStyle = n === top ? "#c8d2e6" : `hsl(${20 + (hue % 40)}, 75%, ${62 + (hue % 14)}%)`;
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
function icicleHit(cv, list, e) {
  const r = cv.getBoundingClientRect();
  const x = e.clientX - r.left, y = e.clientY - r.top;
  for (let i = list.length - 1; i >= 0; i--) {
    const [rx, ry, rw, n] = list[i];
    if (x >= rx && x < rx + rw && y >= ry && y < ry + ROW) return n;
  }
  return null;
}

function drawFlame() {
  const cv = $("flame");
  if (!state.flameTop) return;
  const w = flameWidth || (flameWidth = cv.clientWidth); // read once: no layout per redraw
  rects = drawIcicle(cv, w, state.flameTop, 120, state.flameUnit || bytes);
  document.body.dataset.flameNodes = String(rects.length);
}

function flameHit(e) {
  return icicleHit($("flame"), rects, e);
}

// The owner tree at the cursor: labels split at '@' ("PTA@weight", "model@layer1@activation"),
// each level a node with the bytes below it. In category mode, MindStudio Insight's names for
// the levels it knows (reference §5: PTA -> PTA_Reserved, PTA@ops -> PTA_Operator, @weight ->
// Weight, ...), at most 20 levels, and the bytes of blocks without an owner as "Other".
let ownerRects = [], ownerWidth = 0;

const CATEGORY_PREFIX = { PTA: "PTA_Reserved", "PTA@ops": "PTA_Operator", "PTA@ops@aten": "ATEN", "PTA@model": "PTA_Model",
  PTA_WORKSPACE: "PTA_Workspace", ATB: "ATB_Reserved", MINDSPORE: "MindSpore_Reserved", "(no owner)": "Other" };
const CATEGORY_TAG = { weight: "Weight", gradient: "Gradient", optimizer_state: "Optimizer" };

function ownerPath(label, category) {
  const parts = label.split("@").filter(Boolean);
  if (!category) return parts;
  return parts.slice(0, 20).map((p, i) => CATEGORY_PREFIX[parts.slice(0, i + 1).join("@")] || CATEGORY_TAG[p] || p);
}

function drawOwners(owners, total) {
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

function setupFlame() {
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
  $("fmode").onchange = () => loadFlame().catch(showError);
}

// ---- Allocator state: a pool's regions and its blocks in them ---------------------------------

const SEG_ROW = 16, SEG_LABEL = 360;
let segRects = [], segWidth = 0;

async function loadSegments() {
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

function drawSegments(r) {
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

function setupSegments() {
  if (!state.sum.pools.length) return;
  $("allocsec").hidden = false;
  const sel = $("pool");
  state.sum.pools.forEach((name, i) => sel.append(el("option", { value: String(i) }, name)));
  sel.onchange = () => loadSegments().catch(showError);
  const step = (dir) => {
    const r = state.segments;
    if (!r) return;
    const t = dir < 0 ? r.prev_t : r.next_t;
    if (t !== null) setCursor(t).catch(showError);
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

// ---- Blocks and events: filters, sort and paging over every block -----------------------------

const PAGE = 100;
let tableOffset = 0;

// The window of step n: from the end of step n - 1 (or the run's start) to the end of step n.
function stepWindow(n) {
  const end = (k) => Math.max(-Infinity, ...state.sum.steps.filter((x) => x.step === k).map((x) => x.ts_ns));
  const prev = end(n - 1);
  return [prev === -Infinity ? state.sum.t0 : prev, end(n) + 1];
}

function tableParams() {
  const f = new FormData($("tform"));
  const events = f.get("rows") === "events";
  const p = events ? { kind: f.get("kind"), order: f.get("order") === "desc" ? "desc" : "asc" } : { sort: f.get("sort"), order: f.get("order") };
  Object.assign(p, { limit: PAGE, offset: tableOffset, ...state.th });
  for (const k of ["min_size", "max_size", "site", "owner", "addr"]) {
    const v = String(f.get(k) || "").trim();
    if (v) p[k] = v;
  }
  if (f.get("track") !== "0") p.track = f.get("track");
  if (f.get("ineff")) p.ineff = 1;
  const scope = f.get("scope");
  if (scope === "cursor" && !events) p.t = state.cursor;
  else if (scope === "step" && f.get("step")) [p.t0, p.t1] = stepWindow(Number(f.get("step")));
  else { p.t0 = state.win[0]; p.t1 = state.win[1]; }
  return p;
}

// A report's blocks (the run's largest) filtered and ordered as the server would.
function reportRows(p) {
  return REPORT.lifetimes.blocks.filter((b) =>
    (!p.min_size || b.size >= Number(p.min_size)) && (!p.max_size || b.size <= Number(p.max_size)) &&
    (!p.site || b.site.includes(p.site)) && (!p.owner || (b.owner || "").includes(p.owner)) &&
    (!p.track || b.track === Number(p.track)) && (!p.ineff || b.ineff) &&
    (!p.addr || (b.addr !== undefined && BigInt(b.addr) === BigInt(p.addr))));
}

function reportBlocks(p) {
  const keyOf = { size: (b) => b.size, alloc: (b) => b.alloc_ns, free: (b) => (b.free_ns === null ? Infinity : b.free_ns),
    life: (b) => (b.free_ns === null ? state.sum.t1 : b.free_ns) - b.alloc_ns }[p.sort];
  const rows = reportRows(p).filter((b) => (p.t !== undefined ? b.alloc_ns <= p.t && (b.free_ns === null || b.free_ns > p.t)
    : b.alloc_ns < p.t1 && (b.free_ns === null || b.free_ns > p.t0)));
  rows.sort((a, b) => (p.order === "asc" ? 1 : -1) * (keyOf(a) - keyOf(b)));
  return { count: rows.length, bytes: rows.reduce((s, b) => s + b.size, 0), offset: p.offset, blocks: rows.slice(p.offset, p.offset + p.limit) };
}

function reportEvents(p) {
  const ev = [];
  for (const b of reportRows(p)) {
    const base = { block: b.id, size: b.size, layer: "", addr: b.addr || "", stack_id: b.stack_id, site: b.site, owner: b.owner };
    if (p.kind !== "free" && b.alloc_ns >= p.t0 && b.alloc_ns < p.t1) ev.push({ ...base, kind: "alloc", ns: b.alloc_ns });
    if (p.kind !== "alloc" && b.free_ns !== null && b.free_ns >= p.t0 && b.free_ns < p.t1) ev.push({ ...base, kind: "free", ns: b.free_ns });
  }
  ev.sort((a, b) => (p.order === "desc" ? -1 : 1) * (a.ns - b.ns));
  return { count: ev.length, offset: p.offset, events: ev.slice(p.offset, p.offset + p.limit) };
}

// The LIFE_BLOCKS largest blocks alive in [t0, t1), each with its site (the answer names each
// site once).
async function largestAlive(t0, t1) {
  const r = await api("blocks", { t0, t1, limit: LIFE_BLOCKS, sites: "map", ...state.th });
  if (!r.sitesSet) {
    for (const b of r.blocks) b.site = r.sites[b.stack_id];
    r.sitesSet = true; // the cached answer is complete now
  }
  return r;
}

// The table's first pages of the largest blocks alive in the window, unfiltered, are the first
// rows of the lifetime chart's answer (the same order, ties included): no query of their own.
function firstLargest(p) {
  if (p.kind !== undefined || p.t0 === undefined || p.sort !== "size" || p.order !== "desc" ||
      p.offset + p.limit > LIFE_BLOCKS || ["min_size", "max_size", "site", "owner", "addr", "track", "ineff"].some((k) => k in p))
    return null;
  return largestAlive(p.t0, p.t1).then((r) =>
    ({ count: r.count, bytes: r.bytes, offset: p.offset, blocks: r.blocks.slice(p.offset, p.offset + p.limit) }));
}

// The table follows the window and the cursor only while it is on screen; scrolled to, it
// catches up: what nobody sees costs no query, layout or paint during a zoom or a cursor move.
let tableSeen = false, tableStale = false;

function tableWhenSeen() {
  if (tableSeen) return loadTable();
  tableStale = true;
  return Promise.resolve();
}

function watchTable() {
  new IntersectionObserver((entries) => {
    tableSeen = entries[entries.length - 1].isIntersecting;
    if (tableSeen && tableStale) {
      tableStale = false;
      loadTable().catch(showError);
    }
  }).observe($("tform").closest("section"));
}

async function loadTable() {
  const p = tableParams();
  const events = p.kind !== undefined;
  $("tblocks").hidden = events;
  $("tevents").hidden = !events;
  const r = REPORT ? (events ? reportEvents(p) : reportBlocks(p)) : await (firstLargest(p) || api(events ? "events" : "blocks", p));
  const rows = events ? r.events : r.blocks;
  const tb = $(events ? "tevents" : "tblocks").tBodies[0];
  tb.textContent = "";
  const dur = (ns) => (Math.abs(ns) >= 1e9 ? (ns / 1e9).toFixed(3) + " s" : (ns / 1e6).toFixed(3) + " ms");
  for (const b of rows) {
    const tr = el("tr", { class: "row" });
    if (events) {
      tr.append(el("td", { class: "num" }, rel(b.ns)), el("td", {}, b.kind), el("td", { class: "num" }, bytes(b.size)),
        el("td", {}, b.layer), el("td", { class: "site" }, b.addr), el("td", { class: "site", title: b.site }, b.site), el("td", {}, b.owner || ""));
      tr.onclick = () => showStack(b.stack_id, `${b.kind === "alloc" ? "allocation" : "free"} of ${bytes(b.size)} at ${b.addr}, ${rel(b.ns)}`);
    } else {
      const life = (b.free_ns === null ? state.sum.t1 : b.free_ns) - b.alloc_ns;
      tr.append(el("td", { class: "num" }, bytes(b.size)), el("td", { class: "site", title: b.site }, b.site),
        el("td", {}, b.owner || ""), el("td", { class: "num" }, rel(b.alloc_ns)), el("td", { class: "num" }, rel(b.free_ns)),
        el("td", { class: "num" }, dur(life) + (b.free_ns === null ? "+" : "")));
      if (b.ineff) tr.title = "inefficient: " + ineffNames(b.ineff);
      tr.onclick = () => showStack(b.stack_id, `${bytes(b.size)} block, allocated at ${rel(b.alloc_ns)}, freed ${b.free_ns === null ? "never" : "at " + rel(b.free_ns)}` +
        (b.ineff ? `; inefficient: ${ineffNames(b.ineff)}` : ""));
    }
    tb.append(tr);
  }
  const last = r.offset + rows.length;
  $("thint").textContent = r.count ? `rows ${(r.offset + 1).toLocaleString("en")}–${last.toLocaleString("en")} of ${r.count.toLocaleString("en")}` +
    (events ? " events" : ` (${bytes(r.bytes)})`) + (REPORT ? ", among the run's largest blocks a report keeps" : "") : `no ${events ? "event" : "block"} passes the filters`;
  $("tprev").disabled = r.offset === 0;
  $("tnext").disabled = last >= r.count;
  document.body.dataset.tableRows = `${r.offset}:${rows.length}:${r.count}`;
}

function setupTable() {
  const form = $("tform");
  for (const t of state.sum.tracks) if (t.id) form.track.append(el("option", { value: String(t.id) }, trackLabel(t)));
  const steps = [...new Set(state.sum.steps.map((x) => x.step))].sort((a, b) => a - b);
  for (const n of steps) form.step.append(el("option", { value: String(n) }, `step ${n}`));
  if (!steps.length) form.scope.querySelector("option[value=step]").remove();
  const sync = () => {
    const events = form.rows.value === "events";
    form.kind.hidden = !events;
    form.sort.hidden = events;
    form.step.hidden = form.scope.value !== "step";
    form.scope.querySelector("option[value=cursor]").disabled = events;
    if (events && form.scope.value === "cursor") form.scope.value = "window";
  };
  form.onchange = (e) => {
    if (e && e.target === form.rows) form.order.value = form.rows.value === "events" ? "asc" : "desc"; // time order reads best
    sync();
  };
  sync();
  form.onsubmit = (e) => { e.preventDefault(); tableOffset = 0; loadTable().catch(showError); };
  $("tprev").onclick = () => { tableOffset = Math.max(0, tableOffset - PAGE); loadTable().catch(showError); };
  $("tnext").onclick = () => { tableOffset += PAGE; loadTable().catch(showError); };
}

// Shows the table with these filters (the others cleared), over the whole run.
function tableFor(filters) {
  const form = $("tform");
  for (const k of ["min_size", "max_size", "site", "owner", "addr"]) form[k].value = filters[k] || "";
  form.rows.value = filters.rows || "blocks";
  form.order.value = form.rows.value === "events" ? "asc" : "desc";
  form.ineff.checked = false;
  form.track.value = "0";
  if (filters.step !== undefined) { form.scope.value = "step"; form.step.value = String(filters.step); }
  else form.scope.value = "window";
  form.onchange();
  const go = filters.step === undefined && (state.win[0] !== state.sum.t0 || state.win[1] !== state.sum.t1 + 1)
    ? zoomTo(state.sum.t0, state.sum.t1 + 1, "zoom-reset") : Promise.resolve();
  return go.then(() => { tableOffset = 0; return loadTable(); }).then(() => form.scrollIntoView({ block: "start" }));
}

// ---- Findings: the analyses' reports -----------------------------------------------------------

// The report's text with its call sites ("fn (file:line)"), addresses and step numbers as links:
// a site or an address shows its blocks in the Blocks table, a step its window.
const FINDING_LINK = /([A-Za-z_~.<>:\w$@-]+ \([^()\s]+:\d+\))|(0x[0-9a-f]{6,16})\b|\b(step (\d+))\b/g;

function linkFindings(pre, text) {
  pre.textContent = "";
  let at = 0, links = 0;
  for (const m of text.matchAll(FINDING_LINK)) {
    pre.append(text.slice(at, m.index));
    const a = el("a", {}, m[0]);
    if (m[1]) { a.dataset.site = m[1]; a.title = "its blocks"; a.onclick = () => tableFor({ site: m[1] }).catch(showError); }
    else if (m[2]) { a.dataset.addr = m[2]; a.title = "the blocks at this address"; a.onclick = () => tableFor({ addr: m[2] }).catch(showError); }
    else { a.dataset.step = m[4]; a.title = "this step's events"; a.onclick = () => tableFor({ step: Number(m[4]), rows: "events" }).catch(showError); }
    if (m[3] && !state.sum.steps.some((x) => x.step === Number(m[4]))) pre.append(m[0]); // no such step recorded
    else { pre.append(a); links++; }
    at = m.index + m[0].length;
  }
  pre.append(text.slice(at));
  pre.dataset.links = String(links);
}

async function setupFindings() {
  const r = await api("analyses");
  const sel = $("aname");
  for (const a of r.analyses) {
    const o = el("option", { value: a.name }, a.name);
    o.title = a.summary;
    sel.append(o);
  }
  // compare: two steps of this run, picked here (the first after the warm-up and the last)
  const steps = [...new Set(state.sum.steps.map((x) => x.step))].sort((a, b) => a - b);
  for (const id of ["ca", "cb"]) for (const n of steps) $(id).append(el("option", { value: String(n) }, String(n)));
  if (steps.length >= 2) {
    $("ca").value = String(steps.length > 2 ? steps[1] : steps[0]);
    $("cb").value = String(steps[steps.length - 1]);
  }
  const comparing = () => sel.value === "compare" && steps.length >= 2 && !REPORT;
  const show = async () => {
    const a = r.analyses.find((x) => x.name === sel.value);
    $("ahint").textContent = a ? a.summary : "";
    $("csteps").hidden = !comparing();
    $("atext").textContent = "running memscope analyze " + sel.value + " ...";
    const q = { name: sel.value };
    if (comparing()) q.steps = `${$("ca").value},${$("cb").value}`;
    const t = q.steps && $("ca").value === $("cb").value ? { text: "compare: pick two different steps" } : await api("analysis", q);
    linkFindings($("atext"), t.text);
    document.body.dataset.analysis = sel.value;
  };
  sel.onchange = () => show().catch(showError);
  $("ca").onchange = $("cb").onchange = () => show().catch(showError);
  // the first report when the section comes into view: an analysis of a large run takes the
  // server a while, which the other views should not wait for
  const seen = new IntersectionObserver((entries) => {
    if (!entries.some((e) => e.isIntersecting)) return;
    seen.disconnect();
    show().catch(showError);
  });
  seen.observe($("atext"));
}

// ---- Start -------------------------------------------------------------------------------------

async function start() {
  performance.mark("start");
  if (REPORT) document.title = "memscope report";
  state.sum = await api("summary");
  state.win = [state.sum.t0, state.sum.t1 + 1];
  document.body.dataset.t1 = String(state.sum.t1);
  state.cursor = state.sum.peak_ns;
  renderSummary();
  if (!state.sum.python_calls) $("fmode").querySelector("option[value=python]").remove();
  for (const th of state.sum.python_threads || [])
    $("fthread").append(el("option", { value: `${th.pid}:${th.tid}` }, `process ${th.pid} thread ${th.tid} (${th.calls.toLocaleString("en")} calls)`));
  $("fthread").onchange = () => loadFlame().catch(showError);
  setupFlame();
  $("omode").onchange = () => loadOwners().catch(showError);
  setupLifetimes();
  setupTable();
  watchTable();
  setupSegments();
  $("smode").onchange = () => loadSeries().catch(showError);
  if (state.sum.tracks.filter((t) => t.id > 0 && !t.reserve).length < 2) $("smode").hidden = true;
  $("reset").onclick = () => zoomTo(state.sum.t0, state.sum.t1 + 1, "zoom-reset").catch(showError);
  $("panl").onclick = () => pan(-0.5).catch(showError);
  $("panr").onclick = () => pan(0.5).catch(showError);
  window.addEventListener("keydown", (e) => {
    if (e.target.closest && e.target.closest("input, select, textarea")) return; // typing in a form
    if (e.key === "ArrowLeft" || e.key === "ArrowRight") {
      e.preventDefault();
      pan(e.key === "ArrowLeft" ? -0.5 : 0.5).catch(showError);
    }
  });
  $("topeak").onclick = () => setCursor(state.sum.peak_ns).catch(showError);
  await Promise.all([loadSeries(), loadLifetimes()]);
  await setCursor(state.sum.peak_ns, "cursor-first"); // part of the first view
  await painted();
  performance.mark("first-view-end");
  performance.measure("first-view", "start", "first-view-end");
  document.body.dataset.ready = "1";
  tableWhenSeen().catch(showError);
  setupFindings().catch(showError); // the list now, the first report when scrolled to
  window.addEventListener("resize", () => {
    if (plot) plot.setSize({ width: chartWidth(), height: 280 });
    flameWidth = ownerWidth = segWidth = 0;
    drawFlame();
  });
}

start().catch(showError);
