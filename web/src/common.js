// common.js: what every view of the viewer shares: the page's state, the answers from the
// server (or from a report file's own data), element and number helpers, the performance measures.

export const token = new URLSearchParams(location.search).get("token") || "";
export const $ = (id) => document.getElementById(id);

export const state = {
  sum: null,          // /api/summary
  win: null,          // [t0, t1): the zoom window
  cursor: null,       // ns
  flameRoot: null,    // the tree from /api/flame
  flameTop: null,     // the node drawn as the whole width (click to zoom in)
  flameUnit: null,    // how the flame's values read: bytes, or a duration (Python call trace)
  segments: null,     // the last /api/segments answer (stepping through a pool's events)
  th: {},             // the thresholds of inefficient blocks (lazy, delayed, idle) when set
};

export const INEFF = ["lazy used", "delayed free", "long idle"]; // the bits of a block's "ineff"
export const ineffNames = (f) => INEFF.filter((_, i) => f & (1 << i)).join(", ");

// The largest blocks of a window the lifetime chart shows (and a report keeps).
export const LIFE_BLOCKS = 2000;

// A track's name: "all memory" or a process's layer.
export function trackLabel(t) {
  return t.id === 0 ? "all memory" : `pid ${t.pid} ${t.layer_name}`;
}

// A report file (memscope report) carries its answers: no server to ask.
export const REPORT = window.MEMSCOPE_REPORT || null;

// The precomputed time of the report nearest to t.
export function nearestTime(t) {
  const ts = REPORT.times;
  let lo = 0, hi = ts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (ts[mid] < t) lo = mid + 1; else hi = mid;
  }
  return lo > 0 && t - ts[lo - 1] < ts[lo] - t ? ts[lo - 1] : ts[lo];
}

// The report's answer to a query, as the server would give it.
export function reportAnswer(path, p) {
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
export const answers = new Map();
export const pending = new Map(); // the answers on their way, by query
export const ANSWERS = 32;

export function answerKey(path, params) {
  const q = new URLSearchParams(params);
  if (token) q.set("token", token);
  return `${path}?${q}`;
}

// Keeps an answer got another way (a part of /api/at) as the answer to path with params.
export function keepAnswer(path, params, body) {
  answers.set(answerKey(path, params), body);
  if (answers.size > ANSWERS) answers.delete(answers.keys().next().value);
}

export async function api(path, params = {}) {
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
export function seconds(v) {
  const a = Math.abs(v);
  if (a === 0) return "0";
  if (a >= 1) return +v.toFixed(3) + " s";
  if (a >= 1e-3) return +(v * 1e3).toFixed(3) + " ms";
  return +(v * 1e6).toFixed(3) + " us";
}

export function rel(ns) {
  if (ns === null || ns === undefined) return "never";
  const s = (ns - state.sum.t0) / 1e9;
  return Math.abs(s) >= 1 ? s.toFixed(3) + " s" : (s * 1e3).toFixed(3) + " ms";
}

export function el(tag, attrs = {}, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

export function showError(e) {
  $("err").textContent = String(e.message || e);
}

// Resolves once the browser has painted what the page changed: the next frame's callback, then
// the task after it (the paint happens between them). The measures end here.
export function painted() {
  return new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
}

// Runs fn, recording its duration as the performance measure name (the benchmark reads them).
export function timedSync(name, fn) {
  const t0 = performance.now();
  try { return fn(); } finally { performance.measure(name, { start: t0, end: performance.now() }); }
}

export async function timed(name, fn) {
  const t0 = performance.now();
  try { return await fn(); } finally { performance.measure(name, { start: t0, end: performance.now() }); }
}
