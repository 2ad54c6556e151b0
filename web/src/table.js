// table.js: the Blocks and Events tables: filters, sort and paging over every block.

import { $, LIFE_BLOCKS, REPORT, api, bytes, el, ineffNames, rel, showError, state, trackLabel } from "./common.js";
import { ask } from "./events.js";
import { showStack } from "./stack.js";

// ---- Blocks and events: filters, sort and paging over every block -----------------------------

export const PAGE = 100;
export let tableOffset = 0;

// The table starts again at its first page (a new window or cursor).
export function firstPage() {
  tableOffset = 0;
}

// The window of step n: from the end of step n - 1 (or the run's start) to the end of step n.
export function stepWindow(n) {
  const end = (k) => Math.max(-Infinity, ...state.sum.steps.filter((x) => x.step === k).map((x) => x.ts_ns));
  const prev = end(n - 1);
  return [prev === -Infinity ? state.sum.t0 : prev, end(n) + 1];
}

export function tableParams() {
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
export function reportRows(p) {
  return REPORT.lifetimes.blocks.filter((b) =>
    (!p.min_size || b.size >= Number(p.min_size)) && (!p.max_size || b.size <= Number(p.max_size)) &&
    (!p.site || b.site.includes(p.site)) && (!p.owner || (b.owner || "").includes(p.owner)) &&
    (!p.track || b.track === Number(p.track)) && (!p.ineff || b.ineff) &&
    (!p.addr || (b.addr !== undefined && BigInt(b.addr) === BigInt(p.addr))));
}

export function reportBlocks(p) {
  const keyOf = { size: (b) => b.size, alloc: (b) => b.alloc_ns, free: (b) => (b.free_ns === null ? Infinity : b.free_ns),
    life: (b) => (b.free_ns === null ? state.sum.t1 : b.free_ns) - b.alloc_ns }[p.sort];
  const rows = reportRows(p).filter((b) => (p.t !== undefined ? b.alloc_ns <= p.t && (b.free_ns === null || b.free_ns > p.t)
    : b.alloc_ns < p.t1 && (b.free_ns === null || b.free_ns > p.t0)));
  rows.sort((a, b) => (p.order === "asc" ? 1 : -1) * (keyOf(a) - keyOf(b)));
  return { count: rows.length, bytes: rows.reduce((s, b) => s + b.size, 0), offset: p.offset, blocks: rows.slice(p.offset, p.offset + p.limit) };
}

export function reportEvents(p) {
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
export async function largestAlive(t0, t1) {
  const r = await api("blocks", { t0, t1, limit: LIFE_BLOCKS, sites: "map", ...state.th });
  if (!r.sitesSet) {
    for (const b of r.blocks) b.site = r.sites[b.stack_id];
    r.sitesSet = true; // the cached answer is complete now
  }
  return r;
}

// The table's first pages of the largest blocks alive in the window, unfiltered, are the first
// rows of the lifetime chart's answer (the same order, ties included): no query of their own.
export function firstLargest(p) {
  if (p.kind !== undefined || p.t0 === undefined || p.sort !== "size" || p.order !== "desc" ||
      p.offset + p.limit > LIFE_BLOCKS || ["min_size", "max_size", "site", "owner", "addr", "track", "ineff"].some((k) => k in p))
    return null;
  return largestAlive(p.t0, p.t1).then((r) =>
    ({ count: r.count, bytes: r.bytes, offset: p.offset, blocks: r.blocks.slice(p.offset, p.offset + p.limit) }));
}

// The table follows the window and the cursor only while it is on screen; scrolled to, it
// catches up: what nobody sees costs no query, layout or paint during a zoom or a cursor move.
export let tableSeen = false, tableStale = false;

export function tableWhenSeen() {
  if (tableSeen) return loadTable();
  tableStale = true;
  return Promise.resolve();
}

export function watchTable() {
  new IntersectionObserver((entries) => {
    tableSeen = entries[entries.length - 1].isIntersecting;
    if (tableSeen && tableStale) {
      tableStale = false;
      loadTable().catch(showError);
    }
  }).observe($("tform").closest("section"));
}

let tableAsked = 0;

// Shows the rows the form asks for. Only the latest request draws: an earlier one that
// answers late (the table scrolled into view, then the form submitted) is dropped.
export async function loadTable() {
  const p = tableParams();
  const asked = ++tableAsked;
  const events = p.kind !== undefined;
  const r = REPORT ? (events ? reportEvents(p) : reportBlocks(p)) : await (firstLargest(p) || api(events ? "events" : "blocks", p));
  if (asked !== tableAsked) return;
  $("tblocks").hidden = events;
  $("tevents").hidden = !events;
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
  document.body.dataset.tableOrder = `${events ? "time" : p.sort}:${p.order}`;
}

export function setupTable() {
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
export function tableFor(filters) {
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
    ? ask("zoomTo", state.sum.t0, state.sum.t1 + 1, "zoom-reset") : Promise.resolve();
  return go.then(() => { tableOffset = 0; return loadTable(); }).then(() => form.scrollIntoView({ block: "start" }));
}
