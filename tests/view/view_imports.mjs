// view_imports.mjs: the front end's modules (web/src/*.js) import each other without a cycle:
// prints the first cycle found (a -> b -> ... -> a) and exits 1, or prints "no cycle" and the
// number of modules and imports. Usage: node view_imports.mjs WEB_SRC_DIR
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const dir = process.argv[2];
const graph = new Map();
let edges = 0;
for (const f of readdirSync(dir).filter((f) => f.endsWith(".js")).sort()) {
  const text = readFileSync(join(dir, f), "utf8");
  const deps = [...text.matchAll(/^import\s[^;]*?from\s+"\.\/([^"]+)";/gms)].map((m) => m[1]);
  graph.set(f, deps);
  edges += deps.length;
}
const WHITE = 0, GREY = 1, BLACK = 2;
const colour = new Map([...graph.keys()].map((k) => [k, WHITE]));
const path = [];
function visit(m) {
  colour.set(m, GREY);
  path.push(m);
  for (const d of graph.get(m) || []) {
    if (colour.get(d) === GREY) return [...path.slice(path.indexOf(d)), d];
    if (colour.get(d) === WHITE) {
      const c = visit(d);
      if (c) return c;
    }
  }
  path.pop();
  colour.set(m, BLACK);
  return null;
}
for (const m of graph.keys()) {
  if (colour.get(m) !== WHITE) continue;
  const c = visit(m);
  if (c) {
    console.log(`cycle: ${c.join(" -> ")}`);
    process.exit(1);
  }
}
console.log(`no cycle: ${graph.size} modules, ${edges} imports`);
