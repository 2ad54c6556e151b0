// events.js: what a view asks of a view that imports it (move the cursor, zoom to a window,
// redraw the chart), through actions that view provides as it loads: modules import only
// downwards (common.js, events.js and stack.js at the bottom, main.js at the top), so no two
// modules import each other.

const actions = new Map();

// Registers fn as the action name (once, as the module that does it loads).
export function provide(name, fn) {
  actions.set(name, fn);
}

// Runs the action name with args: its answer (a promise for an asynchronous one).
export function ask(name, ...args) {
  return actions.get(name)(...args);
}
