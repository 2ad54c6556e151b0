// stack.js: the stack panel: a stack's Python and native frames, innermost first, under a title
// (a block, an event, a call site: whatever the click was on).

import { $, api } from "./common.js";

export async function showStack(id, title) {
  const r = await api("stack", { id });
  const lines = [title, ""];
  if (r.py.length) lines.push("Python (innermost first):", ...r.py.map((l) => "  " + l), "");
  lines.push("native (innermost first):", ...(r.c.length ? r.c.map((l) => "  " + l) : ["  (no stack)"]));
  $("stack").textContent = lines.join("\n");
}
