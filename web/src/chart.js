// chart.js: memory over time (uPlot): the series of each track, steps, marks and ranges drawn
// on it, zoom and pan.

import uPlot from "uplot";
import { $, LIFE_BLOCKS, REPORT, answerKey, answers, api, bytes, keepAnswer, painted, seconds, showError, state, timed, trackLabel } from "./common.js";
import { setCursor } from "./cursor.js";
import { provide } from "./events.js";
import { loadFlame } from "./flame.js";
import { loadLifetimes } from "./lifetimes.js";
import { firstPage, tableWhenSeen } from "./table.js";

// ---- Memory over time ------------------------------------------------------------------------

export let plot = null;
export let seriesReq = 0;

export function chartWidth() {
  return Math.max(400, $("chart").clientWidth || document.body.clientWidth - 60);
}

export function seriesPoints() {
  return Math.min(2000, chartWidth());
}

// One request for what a zoom asks (/api/window: the series and the largest blocks alive in
// [t0, t1)), kept as the answers to their own queries.
export async function prefetchWindow(t0, t1) {
  const n = seriesPoints(), life = { t0, t1, limit: LIFE_BLOCKS, sites: "map", ...state.th };
  if (answers.has(answerKey("series", { t0, t1, n })) && answers.has(answerKey("blocks", life))) return;
  const p = { t0, t1, n, limit: LIFE_BLOCKS, sites: "map", ...state.th };
  if (state.sum.ranges) p.ranges = 1;
  const [series, blocks, ranges] = await api("window", p);
  keepAnswer("series", { t0, t1, n }, series);
  keepAnswer("blocks", life, blocks);
  if (ranges) keepAnswer("ranges", { t0, t1, n }, ranges);
}

export const palette = ["#1d2330", "#3d6fd8", "#e07b39", "#2e9e6b", "#c0392b", "#8e44ad", "#16a085", "#7f8c8d"];

export async function loadSeries() {
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
  // what the OS said (the usage monitor, docs/usage.md): RSS, PSS and USS of each process,
  // dashed, never stacked
  const usageColour = ["#7f8c8d", "#b9770e", "#2874a6", "#a93226"];
  const peaks = [];
  (r.usage || []).forEach((u, i) => {
    const colour = usageColour[i % usageColour.length];
    const peak = [u.pid];
    for (const [key, name, dash] of [["rss", "RSS", [6, 3]], ["pss", "PSS", [3, 3]], ["uss", "USS", [1, 3]]]) {
      data.push(u[key]);
      series.push({ label: `pid ${u.pid} ${name}`, stroke: colour, width: 1, dash,
        value: (pl, v) => (v == null ? "" : bytes(v)) });
      peak.push(Math.max(0, ...u[key].filter((v) => v != null)));
    }
    peaks.push(peak.join(":"));
  });
  document.body.dataset.usagePeaks = peaks.join("|");
  // what NVML said each CUDA device had in use (docs/usage.md: read at the traced processes'
  // steps and exits), one series per device, solid and thick
  const deviceColour = ["#117a65", "#6c3483", "#1a5276", "#7e5109"];
  const devicePeaks = [];
  (r.devices || []).forEach((d, i) => {
    data.push(d.used);
    series.push({ label: `device ${d.device} used`, stroke: deviceColour[i % deviceColour.length], width: 2,
      value: (pl, v) => (v == null ? "" : bytes(v)) });
    devicePeaks.push(`${d.device}:${Math.max(0, ...d.used.filter((v) => v != null))}`);
  });
  document.body.dataset.devicePeaks = devicePeaks.join("|");
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

export function drawMarks(u) {
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

// Shows window [a, b) in every view; the time it takes is the performance measure name.
export async function zoomTo(a, b, name = "zoom") {
  state.win = [Math.floor(a), Math.max(Math.ceil(b), Math.floor(a) + 1)];
  performance.mark("zoom-start");
  const byWindow = new FormData($("tform")).get("scope") === "window";
  if (byWindow) firstPage();
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
export function pan(share) {
  const [a, b] = state.win, w = b - a;
  const lo = state.sum.t0, hi = state.sum.t1 + 1;
  let na = Math.round(a + share * w);
  na = Math.max(lo, Math.min(na, hi - w));
  if (na === a) return Promise.resolve(); // at the run's edge already
  return zoomTo(na, na + w, "pan");
}

provide("zoomTo", zoomTo);
provide("redrawChart", () => {
  if (plot) plot.redraw(false);
});
