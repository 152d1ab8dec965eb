#!/usr/bin/env node
// `npm run bench`: mesh-host against the same workload as whole processes, and against
// CFEngine's cf-agent where it is installed, in the same run.
//
// Workload (scripts/bench-workload.mjs): N `file` resources (3 lines, mode 0644) in N/10
// `directory` resources (mode 0755) under /srv of a private root, for N = 100 and 1,000.
// Scenarios, each run BENCH_RUNS times (default 5) and reported as the median; mesh and
// cf-agent take turns run by run, so that on a shared machine both see the same load:
//   first apply   a new, empty root every run (mesh: no store, no cached declaration)
//   no-op         nothing to change (mesh: its declaration cache is warm, as on any repeat run)
//   no-op, cold   mesh only: the same, with its declaration cache removed before each run
//                 (compared with cf-agent's no-op; cf-agent keeps no such cache)
//   drift repair  before each run 10% of the files get other content and 5% are deleted
// mesh runs `node dist/mesh-host.cjs apply --bundle B --root R`. cf-agent runs
// `cf-agent -K -w W -f P`: -K ignores its locks (else it skips promises it ran recently),
// -w is a private work directory (keys made once with cf-key, cf-promises linked into W/bin
// as cf-agent expects), and P is a generated policy with one `files:` promise per resource:
// `create`, `content` (the whole file, as mesh declares it) and `perms` (the mode). Both
// read back what they manage and repair only what differs. Differences that remain: mesh
// makes what it writes durable (cf-agent does not): the changed files' data before they are
// renamed into place (one `sync -f` for a batch of files, or an fsync each for a small one),
// the intents of a pass's changes (one sync for all of them, before the first change), each
// directory that changed (once per pass) and its store when the pass changed anything;
// a pass that changes nothing writes nothing. And mesh keeps a store of what it owns and what
// was there before; cf-agent keeps no such record.
// Every root lives in the bench's own folder of os.tmpdir(); a run's fresh root moves the last
// one aside, and all are deleted when the bench ends. On ext4 without a journal, where a file
// made costs more for every file deleted in the minutes before, the bench first writes the
// filesystem out and waits 61 s (bench-run.mjs settleDeletes; BENCH_SETTLE=SECONDS).
// Wall time is from spawn to exit; peak RSS and CPU come from the kernel (wait4 via GNU time).
// Both run with the environment their units give them (bench-run.mjs UNIT_ENV: PATH and LANG),
// not the shell's.
// Then the fleet language's cost (scripts/bench-language.mjs): the no-op pass over N literal
// files against N templated ones, through `apply --bundle` and through `run --once` against a
// real fleet server, warm and cold cache.
// `node scripts/bench-floor.mjs` measures the floor under these figures: the same syscalls
// in a tiny script, with and without what crash safety adds.
// Results: tables on stdout (with the lowest and highest mesh/cf-agent ratio of the pairs in turn)
// and bench-results/bench.json (BENCH_SIZES=100,1000 to choose N,
// BENCH_LANGUAGE=1000 for the language's N, either empty to skip; MESH_DIST=DIR to measure a
// build other than dist/).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { languageCost, languageRows } from './bench-language.mjs';
import { measure, median, settleDeletes, UNIT_ENV } from './bench-run.mjs';
import { freshRoot, makeDrift, workload, writeCfPolicy, writeMeshBundle } from './bench-workload.mjs';

const top = join(dirname(fileURLToPath(import.meta.url)), '..');
const DIST = process.env.MESH_DIST ?? join(top, 'dist');
const HOST = join(DIST, 'mesh-host.cjs');
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const sizes = (text) => text.split(',').filter(Boolean).map(Number);
const SIZES = sizes(process.env.BENCH_SIZES ?? '100,1000');
const LANGUAGE = sizes(process.env.BENCH_LANGUAGE ?? '1000');
const work = mkdtempSync(join(tmpdir(), 'mesh-bench-'));
const CF = findCfAgent();

/** One tool on one workload: how to run it once, and where its machine is. */
function meshTool(name, resources) {
  const bundle = join(work, `mesh-${name}-bundle`);
  writeMeshBundle(bundle, resources);
  const root = join(work, `mesh-${name}-root`);
  freshRoot(root);
  return { name: 'mesh', root, run: () => measure('node', [HOST, 'apply', '--bundle', bundle, '--root', root], { MESH_LOG_LEVEL: 'warn' }), coldCache: () => rmSync(join(root, 'var/lib/mesh-host/bundle-cache.json'), { force: true }) };
}

function cfTool(n, resources) {
  const dir = join(work, `cf-${n}`);
  const root = join(dir, 'root');
  const workdir = join(dir, 'work');
  mkdirSync(join(workdir, 'bin'), { recursive: true });
  symlinkSync(join(dirname(CF), 'cf-promises'), join(workdir, 'bin/cf-promises'));
  execFileSync(join(dirname(CF), 'cf-key'), [], { env: { ...process.env, CFENGINE_TEST_OVERRIDE_WORKDIR: workdir }, stdio: 'ignore' });
  const policy = join(dir, 'policy.cf');
  writeCfPolicy(policy, root, resources);
  return { name: 'cf-agent', root, run: () => measure(CF, ['-K', '-w', workdir, '-f', policy]) };
}

/** The scenarios, each with what to do before every run of it; `meshOnly` ones have no cf-agent twin. */
const SCENARIOS = [
  { name: 'first apply', before: (tool) => freshRoot(tool.root) },
  { name: 'no-op', before: () => {} },
  { name: 'no-op, cold', before: (tool) => tool.coldCache(), meshOnly: true, compareWith: 'no-op' },
  { name: 'drift repair', before: (tool, resources) => makeDrift(tool.root, resources) },
];

/**
 * Run every scenario RUNS times for each tool. Within a scenario the tools take turns run by
 * run, so that both see the same load on a shared machine. Fails loudly when a run fails.
 */
async function benchTools(tools, resources) {
  const out = Object.fromEntries(tools.map((t) => [t.name, {}]));
  for (const sc of SCENARIOS) {
    const these = tools.filter((t) => !sc.meshOnly || t.coldCache);
    const runs = Object.fromEntries(these.map((t) => [t.name, []]));
    for (let i = 0; i < RUNS; i++) {
      for (const tool of these) {
        sc.before(tool, resources);
        const r = await tool.run();
        if (r.code !== 0) throw new Error(`${tool.name} ${sc.name} failed (exit ${r.code}):\n${r.stdout}${r.stderr}`);
        runs[tool.name].push({ wallMs: r.wallMs, rssMb: r.rssMb, cpuMs: r.cpuMs });
      }
    }
    for (const [name, rs] of Object.entries(runs)) {
      out[name][sc.name] = { wallMs: median(rs.map((r) => r.wallMs)), cpuMs: median(rs.map((r) => r.cpuMs)), rssMb: median(rs.map((r) => r.rssMb)), runs: rs };
    }
  }
  return out;
}

function findCfAgent() {
  const found = () => ['/usr/bin/cf-agent', '/usr/sbin/cf-agent', '/var/cfengine/bin/cf-agent'].find((p) => existsSync(p)) ?? null;
  if (found()) return found();
  // Missing: install Debian's cfengine3 when this bench may (root, with apt-get); never in the tests.
  if (process.getuid?.() === 0 && existsSync('/usr/bin/apt-get')) {
    console.log('cf-agent is not installed: installing Debian\'s cfengine3 (apt-get install -y cfengine3) to compare with it');
    try {
      execFileSync('apt-get', ['install', '-y', '--no-install-recommends', 'cfengine3'], { stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
    } catch {
      console.log('apt-get could not install cfengine3 (try apt-get update first); measuring mesh alone');
    }
    return found();
  }
  console.log('cf-agent is not installed and this bench cannot install it (it needs root and apt-get): run `sudo apt-get install cfengine3` to compare with it; measuring mesh alone');
  return null;
}

const results = { at: new Date().toISOString(), machine: { cpus: cpus().length, model: cpus()[0]?.model, loadavg: loadavg() }, runs: RUNS, cfAgent: CF, sizes: {} };
try {
  results.filesystem = await settleDeletes(work);
  for (const n of SIZES) {
    const resources = workload(n);
    const measured = await benchTools([meshTool(String(n), resources), ...(CF ? [cfTool(n, resources)] : [])], resources);
    results.sizes[n] = { resources: resources.length, mesh: measured.mesh, cfAgent: measured['cf-agent'] ?? null };
  }
  results.language = {};
  for (const n of LANGUAGE) results.language[n] = await languageCost(n, { work, dist: DIST, runs: RUNS, bundleTool: meshTool });
} finally {
  rmSync(work, { recursive: true, force: true });
}

const f = (x, d = 0) => (Number.isFinite(x) ? x.toFixed(d) : '-');
const rows = [['files', 'scenario', 'mesh wall ms', 'cpu ms', 'rss MB', 'cf-agent wall ms', 'cpu ms', 'rss MB', 'mesh/cf wall', 'mesh/cf cpu']];
for (const [n, { mesh, cfAgent }] of Object.entries(results.sizes)) {
  for (const sc of SCENARIOS) {
    const m = mesh[sc.name];
    const c = cfAgent?.[sc.compareWith ?? sc.name];
    const na = ['n/a', 'n/a', 'n/a', 'n/a', 'n/a'];
    rows.push([n, sc.name, f(m.wallMs), f(m.cpuMs), f(m.rssMb, 1), ...(c ? [f(c.wallMs), f(c.cpuMs), f(c.rssMb, 1), f(m.wallMs / c.wallMs, 2), f(m.cpuMs / c.cpuMs, 2)] : na)]);
  }
}
/** Print `rows` aligned, the first `left` columns to the left. */
const table = (rows, left) => {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  for (const r of rows) console.log(r.map((c, i) => (i < left ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  '));
};
if (rows.length > 1) table(rows, 2);
// Each run of mesh was paired with the cf-agent run right after it: the spread of the pairs'
// ratios says how much of a median's distance from a goal the machine's own swing could be.
for (const [n, { mesh, cfAgent }] of Object.entries(results.sizes)) {
  if (!cfAgent) continue;
  const spreads = SCENARIOS.filter((sc) => !sc.meshOnly).map((sc) => {
    const ratios = mesh[sc.name].runs.map((r, i) => r.wallMs / cfAgent[sc.name].runs[i].wallMs).sort((a, b) => a - b);
    return `${sc.name} ${f(ratios[0], 2)}–${f(ratios.at(-1), 2)}`;
  });
  console.log(`${n} files, mesh/cf wall pair by pair (lowest–highest of ${RUNS}): ${spreads.join(', ')}`);
}
if (LANGUAGE.length) {
  console.log(`${rows.length > 1 ? '\n' : ''}the language's cost: no-op pass, literal files against the same files templated (a variable, a fact, a loop)`);
  table(languageRows(results.language), 3);
}
results.loadavgAfter = loadavg();
console.log(`\nmedian of ${RUNS} runs; ${results.machine.cpus} cpus, load average ${results.machine.loadavg.map((l) => l.toFixed(1)).join(' ')} at the start, ${results.loadavgAfter.map((l) => l.toFixed(1)).join(' ')} at the end; environment ${Object.keys(UNIT_ENV).join(', ')} (as under systemd)${settled(results.filesystem)}${CF ? '' : '; cf-agent not installed (Debian package cfengine3)'}`);
mkdirSync(join(top, 'bench-results'), { recursive: true });
writeFileSync(join(top, 'bench-results/bench.json'), JSON.stringify(results, null, 2) + '\n');

/** What the footer says of the filesystem the runs made their files on. */
function settled(fs) {
  if (!fs?.journalLessExt4) return '';
  return fs.settledSeconds > 0 ? `; files made on ext4 without a journal, measured from ${fs.settledSeconds} s after it was written out` : '; files made on ext4 without a journal, measured at once (BENCH_SETTLE=0): files deleted just before the bench may have slowed those it made';
}
