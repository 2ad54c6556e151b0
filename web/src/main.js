// main.js: memscope's viewer page. Asks the server (src/view/api.c) for aggregated answers
// only (a few thousand points or rows each), or reads them from the page itself in a report
// file (window.MEMSCOPE_REPORT, src/view/report.c), and draws them: memory over time (uPlot),
// the block lifetime chart, flame graphs of allocation stacks and of the Python call trace, the
// largest blocks and the owner tree at the time cursor, a pool's allocator state, the Blocks
// table and the analyses' findings. Every view follows the cursor and the zoom window;
// performance measures time the first view, each zoom and each cursor move.

import { chartWidth, loadSeries, pan, plot, zoomTo } from "./chart.js";
import { $, REPORT, api, el, painted, showError, state } from "./common.js";
import { loadOwners, setCursor } from "./cursor.js";
import { setupFindings } from "./findings.js";
import { drawFlame, flameResized, loadFlame, setupFlame } from "./flame.js";
import { loadLifetimes, setupLifetimes } from "./lifetimes.js";
import { segmentsResized, setupSegments } from "./segments.js";
import { renderSummary } from "./summary.js";
import { setupTable, tableWhenSeen, watchTable } from "./table.js";

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
    flameResized();
    segmentsResized();
    drawFlame();
  });
}

start().catch(showError);
