#!/usr/bin/env node
// The floor under `npm run bench`: what the bench's workload costs when a tiny script makes
// only the syscalls, as whole processes (node's own start included), so that mesh-host's figures
// can be read against what no implementation in Node can go below. For each scenario, the same
// work with crash safety (what mesh-host must do: intents synced before any change, file data
// synced before the rename that puts it in place, the renamed folders synced, the store written
// atomically) and without it (what cf-agent does: write in place, sync nothing).
//   start          node -e 0: the runtime alone
//   no-op          lstat and read every declared file and directory
//   first apply    create the directories and files (from an empty root)
//   drift repair   read every file, rewrite 10% and recreate 5% (scripts/bench-workload.mjs)
// BENCH_SIZES (default 1000), BENCH_RUNS (default 7) and BENCH_SETTLE as for bench.mjs; medians.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { measure, median, settleDeletes } from './bench-run.mjs';
import { freshRoot, makeDrift, workload } from './bench-workload.mjs';

const RUNS = Number(process.env.BENCH_RUNS ?? 7);
const SIZES = (process.env.BENCH_SIZES ?? '1000').split(',').filter(Boolean).map(Number);
const work = mkdtempSync(join(tmpdir(), 'mesh-floor-'));

// One script for every case: argv = root, resources file, mode (read | write | drift), safe (1 | 0).
const SCRIPT = String.raw`
import { closeSync, fdatasyncSync, fsyncSync, lstatSync, mkdirSync, openSync, readFileSync, renameSync, writeFileSync, writeSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { dirname } from 'node:path';
const [root, file, mode, safe] = process.argv.slice(2);
const resources = JSON.parse(readFileSync(file, 'utf8'));
const syncDir = (d) => { const fd = openSync(d, 'r'); fsyncSync(fd); closeSync(fd); };
let toWrite = [];
for (const r of resources) {
  const path = root + r.path;
  const st = lstatSync(path, { throwIfNoEntry: false });
  if (r.type === 'directory') { if (!st) mkdirSync(path, { mode: 0o755 }); continue; }
  if (mode === 'write' || !st || readFileSync(path, 'utf8') !== r.content) toWrite.push([path, r.content]);
}
if (toWrite.length === 0) process.exit(0);
const state = root + '/var/lib/mesh-host';
mkdirSync(state, { recursive: true });
if (safe === '1') {
  const fd = openSync(state + '/journal', 'a');
  writeSync(fd, toWrite.map(([p]) => JSON.stringify({ intent: p })).join('\n') + '\n');
  fdatasyncSync(fd);
  closeSync(fd);
  for (const [p, c] of toWrite) writeFileSync(p + '.tmp', c);
  spawnSync('sync', ['-f', root]);
  for (const [p] of toWrite) renameSync(p + '.tmp', p);
  for (const d of new Set(toWrite.map(([p]) => dirname(p)))) syncDir(d);
  writeFileSync(state + '/store.tmp', JSON.stringify(toWrite.map(([p]) => ({ verified: p }))));
  const fd2 = openSync(state + '/store.tmp', 'r+'); fsyncSync(fd2); closeSync(fd2);
  renameSync(state + '/store.tmp', state + '/store.json');
  syncDir(state);
} else for (const [p, c] of toWrite) writeFileSync(p, c);
`;
const script = join(work, 'floor.mjs');
writeFileSync(script, SCRIPT);

const table = [['files', 'scenario', 'floor, safe wall ms', 'cpu ms', 'floor, unsafe wall ms', 'cpu ms']];
let filesystem;
try {
  filesystem = await settleDeletes(work);
  for (const n of SIZES) {
    const resources = workload(n);
    const file = join(work, `resources-${n}.json`);
    writeFileSync(file, JSON.stringify(resources));
    const start = [];
    for (let i = 0; i < RUNS; i++) start.push(await measure('node', ['-e', '0']));
    table.push([String(n), 'start (node -e 0)', f(median(start.map((r) => r.wallMs))), f(median(start.map((r) => r.cpuMs))), '', '']);
    for (const [name, mode, before] of [['first apply', 'write', (root) => freshRoot(root)], ['no-op', 'read', () => {}], ['drift repair', 'drift', (root) => makeDrift(root, resources)]]) {
      const runs = { 1: [], 0: [] };
      const roots = { 1: join(work, `safe-${n}`), 0: join(work, `unsafe-${n}`) };
      for (const safe of [1, 0]) {
        freshRoot(roots[safe]);
        await measure('node', [script, roots[safe], file, 'write', String(safe)]);
      }
      for (let i = 0; i < RUNS; i++) {
        for (const safe of [1, 0]) {
          before(roots[safe]);
          const r = await measure('node', [script, roots[safe], file, mode, String(safe)]);
          if (r.code !== 0) throw new Error(r.stderr);
          runs[safe].push(r);
        }
      }
      const m = (rs, k) => f(median(rs.map((r) => r[k])));
      table.push([String(n), name, m(runs[1], 'wallMs'), m(runs[1], 'cpuMs'), m(runs[0], 'wallMs'), m(runs[0], 'cpuMs')]);
    }
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
const widths = table[0].map((_, i) => Math.max(...table.map((r) => r[i].length)));
for (const r of table) console.log(r.map((c, i) => (i < 2 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  '));
console.log(`median of ${RUNS} runs${filesystem?.journalLessExt4 ? `; on ext4 without a journal, ${filesystem.settledSeconds > 0 ? `from ${filesystem.settledSeconds} s after it was written out` : 'at once (BENCH_SETTLE=0)'}` : ''}`);

function f(x) {
  return Number.isFinite(x) ? x.toFixed(0) : '-';
}
