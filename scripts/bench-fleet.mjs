#!/usr/bin/env node
// `npm run bench:fleet`: how far one git server carries a fleet (docs/scale.md explains the
// numbers). Phase 1 runs N real simulated hosts (default 1,000) against `mesh-cli serve`;
// phase 2 generates a 10,000-node fleet with reports made by our own code and measures the
// poll, the push and `mesh-cli status` at that size; phase 3 measures report growth per node
// per day; phase 4 compares what a host's changed poll downloads with the nodes in groups
// against all in nodes/ (bench-fleet-layout.mjs); phase 5 sends a burst of hosts that each need
// git against the server's cap on git processes and against no cap (bench-fleet-burst.mjs). Prints
// a table and writes bench-results/fleet.json.
// Options: --nodes N (phase 1, 0 skips), --big N (phase 2, 0 skips; --shards K, default 4: status
// again with the reports in K shard repositories, 0 skips), --layout N and --groups G
// (phase 4, default 2,000 nodes in 40 groups, 0 skips), --burst N (phase 5, default 300 hosts,
// 0 skips); MESH_DIST (built CLIs), MESH_BENCH_DIR
// (default /dev/shm), MESH_BENCH_KEEP=1 keeps the work folder.
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuSeconds, git, load, measured, startServer } from './bench-fleet-lib.mjs';
import { realFleet } from './bench-fleet-real.mjs';
import { bigFleet } from './bench-fleet-big.mjs';
import { growth } from './bench-fleet-growth.mjs';
import { burst } from './bench-fleet-burst.mjs';
import { layouts } from './bench-fleet-layout.mjs';
import { printTable } from './bench-fleet-table.mjs';

const top = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = process.env.MESH_DIST ?? join(top, 'dist');
const cli = join(dist, 'mesh-cli.mjs');
const arg = (name, fallback) => { const i = process.argv.indexOf(name); return i > 0 ? Number(process.argv[i + 1]) : fallback; };
const nodes = arg('--nodes', 1000);
const big = arg('--big', 10_000);
const layout = arg('--layout', 2000);
const groups = arg('--groups', 40);
const bursting = arg('--burst', 300);
const shards = arg('--shards', 4);
if (!existsSync(cli)) throw new Error(`${cli} is missing: build first (node scripts/build.mjs)`);

// tmpfs when there is one: this VM's disk takes ~4 ms per ref lock, which would measure the disk, not git.
const base = process.env.MESH_BENCH_DIR ?? (existsSync('/dev/shm') ? '/dev/shm' : tmpdir());
const work = mkdtempSync(join(base, 'mesh-bench-'));
const started = performance.now();
const servers = [];
const OPERATOR = randomBytes(24).toString('base64url');
const results = { startedAt: new Date().toISOString(), machine: { cpus: cpus().length, cpu: cpus()[0]?.model, node: process.version, git: git(top, ['--version']), workDir: base } };

/**
 * A bare repo DATA/fleet.git with HEAD on main, served by `mesh-cli serve` as a fleet would run
 * it (every request authenticated, other nodes' report branches hidden, the pre-receive hook on
 * every push) or, with `open`, by `mesh-cli serve --open` (none of that). The operator's
 * credential is written to DATA/operators first, so that the bench knows it.
 */
async function served(name, { open = false, data = join(work, name), args = [] } = {}) {
  if (!existsSync(join(data, 'fleet.git'))) {
    mkdirSync(data, { recursive: true });
    git(data, ['init', '--quiet', '--bare', '--initial-branch=main', 'fleet.git']);
    writeFileSync(join(data, 'operators'), `operator:${createHash('sha256').update(OPERATOR).digest('hex')}\n`, { mode: 0o600 });
  }
  const server = await startServer(cli, ['serve', '--port', '0', '--data', data, ...(open ? ['--open'] : []), ...args]);
  servers.push(server);
  return { data, bare: join(data, 'fleet.git'), server: { ...server, operatorUrl: server.url.replace('://', `://operator:${OPERATOR}@`) } };
}

/**
 * `mesh-cli status --json` in `checkout`, timed from outside (its fetch included), with its CPU
 * time, the server's, and the phases of its report-index refresh (MESH_TIMINGS, report-index.ts).
 */
async function statusRun(checkout, expected, server) {
  const probeMs = machineProbe();
  const cpu0 = cpuSeconds(process.pid); // counts the CLI and its git children once they are reaped
  const own0 = process.cpuUsage(); // this process's own share of that (its threads: the garbage collector's too)
  const r = await measured(server, async () => {
    const run = spawnSync('node', [cli, 'status', '--json'], { cwd: checkout, env: { ...process.env, MESH_TIMINGS: '1' }, maxBuffer: 512 * 1024 * 1024 });
    // 4: some node has not applied main's tip (the sharded phase moves main past the reports' commit).
    if (run.status !== 0 && run.status !== 4) throw new Error(`mesh-cli status failed (exit ${run.status}): ${run.stderr}`);
    const timings = /^mesh-timings (.*)$/m.exec(run.stderr.toString());
    return { json: JSON.parse(run.stdout.toString()), timings: timings ? JSON.parse(timings[1]) : null };
  });
  const rows = r.result.json.nodes;
  return { nodes: rows.length, expected, valid: rows.filter((x) => x.signature === 'valid').length, chainOk: rows.filter((x) => x.chain === 'ok').length, totalS: r.wallS, cpuS: cpuSeconds(process.pid) - cpu0, benchCpuS: ((u) => (u.user + u.system) / 1e6)(process.cpuUsage(own0)), serverCpuS: r.serverCpuS, probeMs, timings: r.result.timings };
}

/**
 * How fast this machine runs one thread right now: the milliseconds of a fixed loop of integer
 * work (0.20–0.25 s here on a slow day; the probe itself moves by a few per cent), timed just
 * before a status run. This machine's speed moves by more than 10 % with what ran before
 * (docs/scale.md, sessions 21 and 22), so each run's figure is printed beside it: two runs
 * compare only at a like probe.
 */
function machineProbe() {
  const t0 = performance.now();
  let x = 0;
  for (let i = 0; i < 8e6; i++) x = (x + i * 2654435761) % 1000003;
  return x < 0 ? NaN : performance.now() - t0;
}

try {
  const sim = await load(top, 'scripts/bench-fleet-sim.ts', join(work, 'sim.mjs'));
  if (nodes > 0) {
    const { bare, data, server } = await served('real');
    results.real = await realFleet(sim, { n: nodes, work: join(work, 'real-hosts'), bare, server, statusRun: (c, n) => statusRun(c, n, server) });
    results.growth = await growth(sim, { work: join(work, 'growth-hosts'), data, server });
  }
  if (big > 0) {
    const served1 = await served('big');
    const open = await served('big', { open: true, data: served1.data });
    results.big = await bigFleet(sim, { n: big, work: join(work, 'big'), bare: served1.bare, server: served1.server, open: open.server, statusRun: (c, n) => statusRun(c, n, served1.server), shards });
  }
  if (layout > 0) results.layout = await layouts(sim, { n: layout, groups, work: join(work, 'layout'), served });
  if (bursting > 0) results.burst = await burst({ n: bursting, served });
  results.totalS = (performance.now() - started) / 1000;
  printTable(results);
  mkdirSync(join(top, 'bench-results'), { recursive: true });
  writeFileSync(join(top, 'bench-results/fleet.json'), JSON.stringify(results, null, 2) + '\n');
  console.log(`\nwritten to bench-results/fleet.json (${results.totalS.toFixed(0)} s in all)`);
} finally {
  await Promise.all(servers.map((s) => s.stop()));
  if (process.env.MESH_BENCH_KEEP) console.error(`kept ${work}`);
  else rmSync(work, { recursive: true, force: true });
}
