// cursor.js: the time cursor and the views that follow it: the largest blocks, a block's
// stack, the owner tree.

import { $, REPORT, answerKey, answers, api, bytes, el, keepAnswer, nearestTime, painted, rel, state, timed } from "./common.js";
import { ask, provide } from "./events.js";
import { drawOwners, loadFlame } from "./flame.js";
import { loadSegments } from "./segments.js";
import { showStack } from "./stack.js";
import { firstPage, tableWhenSeen } from "./table.js";

// ---- Cursor-driven views ----------------------------------------------------------------------

export async function setCursor(t, name = "cursor") {
  if (REPORT) t = nearestTime(t); // a report has its answers at a set of times
  state.cursor = t;
  $("cursor").textContent = `cursor at ${rel(t)}${REPORT ? " (the report's nearest time)" : ""}`;
  ask("redrawChart");
  performance.mark("cursor-start");
  const byCursor = new FormData($("tform")).get("scope") === "cursor";
  if (byCursor) firstPage();
  if (!REPORT) await timed("cursor:at", () => prefetchAt(t));
  await Promise.all([timed("cursor:blocks", loadBlocks), timed("cursor:owners", loadOwners),
    $("fmode").value === "live" ? timed("cursor:flame", loadFlame) : null,
    byCursor ? timed("cursor:table", tableWhenSeen) : null, timed("cursor:segments", loadSegments)]);
  await painted();
  performance.mark("cursor-end");
  performance.measure(name, "cursor-start", "cursor-end");
  document.body.dataset.cursor = String(t);
}
provide("setCursor", setCursor);

// One request for what the views below ask at time t (/api/at: the blocks, owners, live flame
// graph and allocator state there), kept as the answers to their own queries: a browser's round
// trip costs more than the server's answers.
export async function prefetchAt(t) {
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

export async function loadBlocks() {
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

export async function loadOwners() {
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
