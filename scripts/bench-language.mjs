// What the fleet language costs a pass that changes nothing: N files declared literally against
// the same N files each `template: true` reading a variable, a fact and a loop (they render to
// the same content, bench-workload.mjs), through both ways a host loads a declaration:
//   apply --bundle   the declaration from a local folder
//   run --once       the declaration from the fleet repo's git objects, after poll and trust
//                    (a real `mesh-cli serve` on 127.0.0.1, bench-host.mjs)
// Each is measured warm (the rendered declaration cached from the pass before, as on any
// repeat pass) and cold (the cache removed before each run: every pass parses and renders).
// Literal and templated take turns run by run, the order swapped every run, so that on a
// shared machine both see the same load; each figure is the median of `runs`.
import { join } from 'node:path';
import { benchFleet } from './bench-host.mjs';
import { median } from './bench-run.mjs';
import { workload } from './bench-workload.mjs';

/** Literal against templated for `n` files, by path and cache state; `bundleTool(name, resources)` makes an `apply --bundle` tool. */
export async function languageCost(n, { work, dist, runs, bundleTool }) {
  const literal = workload(n);
  const templated = workload(n, { templated: true });
  const fleet = await benchFleet(join(work, `language-${n}`), dist);
  try {
    const paths = {
      'apply --bundle': { literal: bundleTool(`literal-${n}`, literal), templated: bundleTool(`templated-${n}`, templated) },
      'run --once': { literal: await fleet.node(`literal-${n}`, literal), templated: await fleet.node(`templated-${n}`, templated) },
    };
    const out = {};
    for (const [path, tools] of Object.entries(paths)) {
      for (const t of Object.values(tools)) await once(t, path); // the first apply, and a warm cache
      out[path] = { warm: await alternate(tools, runs, () => {}), cold: await alternate(tools, runs, (t) => t.coldCache()) };
    }
    return out;
  } finally {
    await fleet.stop();
  }
}

async function once(tool, what) {
  const r = await tool.run();
  if (r.code !== 0) throw new Error(`${what} failed (exit ${r.code}):\n${r.stdout}${r.stderr}`);
  return r;
}

/** `runs` pairs of passes, literal and templated in turn (the order swapped every pair); medians and the ratio. */
async function alternate(tools, runs, before) {
  const order = ['literal', 'templated'];
  const rs = { literal: [], templated: [] };
  for (let i = 0; i < runs; i++) {
    for (const name of i % 2 ? [...order].reverse() : order) {
      before(tools[name]);
      const r = await once(tools[name], name);
      rs[name].push({ wallMs: r.wallMs, cpuMs: r.cpuMs });
    }
  }
  const med = (name, k) => median(rs[name].map((r) => r[k]));
  const lit = { wallMs: med('literal', 'wallMs'), cpuMs: med('literal', 'cpuMs') };
  const tpl = { wallMs: med('templated', 'wallMs'), cpuMs: med('templated', 'cpuMs') };
  return { literal: lit, templated: tpl, wallRatio: tpl.wallMs / lit.wallMs, cpuRatio: tpl.cpuMs / lit.cpuMs, runs: rs };
}

/** The table rows of `languageCost`'s results. */
export function languageRows(results) {
  const f = (x, d = 0) => (Number.isFinite(x) ? x.toFixed(d) : '-');
  const rows = [['files', 'path', 'cache', 'literal ms', 'cpu ms', 'templated ms', 'cpu ms', 'templated/literal wall', 'cpu']];
  for (const [n, byPath] of Object.entries(results)) {
    for (const [path, states] of Object.entries(byPath)) {
      for (const [cache, r] of Object.entries(states)) {
        rows.push([n, path, cache, f(r.literal.wallMs), f(r.literal.cpuMs), f(r.templated.wallMs), f(r.templated.cpuMs), f(r.wallRatio, 3), f(r.cpuRatio, 3)]);
      }
    }
  }
  return rows;
}
