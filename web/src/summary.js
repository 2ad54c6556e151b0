// summary.js: the run's summary at the top of the page: peak, leaks, the sites at the peak and
// never freed, steps, pools and the warnings of the recording.

import { $, bytes, el, rel, state } from "./common.js";
import { showStack } from "./stack.js";

// ---- Summary ---------------------------------------------------------------------------------

export function renderSummary() {
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
      // one row per call site (the analyses' rule); a click shows its largest stack
      const title = r.stacks > 1 ? `${r.site}: ${r.stacks} stacks, the largest shown on click` : r.site;
      tr.append(el("td", { class: "num" }, bytes(r.bytes)), el("td", { class: "site", title }, r.site));
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
