// findings.js: the analyses' reports, their call sites, addresses and steps linked into the
// views, the compare of two steps.

import { $, REPORT, api, el, showError, state } from "./common.js";
import { tableFor } from "./table.js";

// ---- Findings: the analyses' reports -----------------------------------------------------------

// The report's text with its call sites ("fn (file:line)"), addresses and step numbers as links:
// a site or an address shows its blocks in the Blocks table, a step its window.
export const FINDING_LINK = /([A-Za-z_~.<>:\w$@-]+ \([^()\s]+:\d+\))|(0x[0-9a-f]{6,16})\b|\b(step (\d+))\b/g;

export function linkFindings(pre, text) {
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

export async function setupFindings() {
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
