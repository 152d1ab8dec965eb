// Helpers for scripts/bench-fleet.mjs: git, the fleet repo generator (one `git fast-import`),
// the served git server and its CPU time from /proc, and the bundle of simulated-host code.
import { execFileSync, spawn } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';

const t0 = performance.now();
/** Progress on stderr, with the time since the bench started. */
export function progress(message) {
  process.stderr.write(`[${((performance.now() - t0) / 1000).toFixed(0).padStart(4)} s] ${message}\n`);
}

/** Run git in `cwd`; returns stdout. */
export function git(cwd, args, input) {
  return execFileSync('git', args, { cwd, input, maxBuffer: 512 * 1024 * 1024, stdio: ['pipe', 'pipe', 'pipe'] }).toString().trim();
}

/** Bundle a TS entry (agent/ and mesh-cli/ sources) into `outfile` the way scripts/build.mjs bundles the CLIs. */
export async function bundle(top, entry, outfile) {
  await build({
    entryPoints: [join(top, entry)], outfile, bundle: true, platform: 'node', target: 'node20', format: 'esm', logLevel: 'warning',
    define: { __MESH_VERSION__: JSON.stringify('bench') },
    banner: { js: "import { createRequire as __meshRequire } from 'node:module'; const require = __meshRequire(import.meta.url);" },
  });
  return outfile;
}

/** Bundle and import. */
export async function load(top, entry, outfile) {
  return import(pathToFileURL(await bundle(top, entry, outfile)).href);
}

/** Write one commit on refs/heads/main of the bare repo `bare` with `files` (path → text), on top of main when it exists. */
export function commitFiles(bare, files, message, parent) {
  const parts = [`commit refs/heads/main\ncommitter mesh-bench <bench@localhost> ${Math.floor(Date.now() / 1000)} +0000\n${importData(message)}`];
  if (parent) parts.push(`from ${parent}\n`);
  for (const [path, text] of Object.entries(files)) parts.push(`M 100644 inline ${path}\n${importData(text)}`);
  git(bare, ['fast-import', '--quiet'], parts.join(''));
  return git(bare, ['rev-parse', 'refs/heads/main']);
}

/** `text` as a `data` block of a `git fast-import` stream. */
export function importData(text) {
  return `data ${Buffer.byteLength(text)}\n${text}\n`;
}

/** Start a git server (`node SCRIPT ARGS...`, which prints "listening on URL" first); requests are logged to a pipe we drain. */
export async function startServer(script, args) {
  const proc = spawn('node', [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  proc.stderr.resume(); // the request log
  const line = await new Promise((resolve, reject) => {
    createInterface({ input: proc.stdout }).once('line', resolve);
    proc.once('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
  });
  return {
    url: line.replace(/^listening on /, ''),
    pid: proc.pid,
    stop: () => new Promise((resolve) => (proc.exitCode !== null ? resolve() : (proc.once('exit', resolve), proc.kill('SIGTERM')))),
  };
}

const TICK = Number(execFileSync('getconf', ['CLK_TCK']).toString()) || 100;

/** CPU seconds (user + system) of process `pid` and of every child it has waited for (git http-backend and its git children). */
export function cpuSeconds(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) / TICK;
}

/** Time `work()` and the server's CPU over it. Children finish a moment after their answer: wait for them to be reaped. */
export async function measured(server, work) {
  const cpu0 = cpuSeconds(server.pid);
  const t0 = performance.now();
  const result = await work();
  const wallS = (performance.now() - t0) / 1000;
  await new Promise((r) => setTimeout(r, 300));
  return { result, wallS, serverCpuS: cpuSeconds(server.pid) - cpu0 };
}

/** Run `fn` over `items`, at most `limit` at a time (Infinity: all at once). */
export async function pool(items, limit, fn) {
  const out = new Array(items.length);
  let next = 0;
  const worker = async () => { while (next < items.length) { const i = next++; out[i] = await fn(items[i], i); } };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** Per-host meter deltas summarised: requests and bytes (sent + received) per operation. */
export function perOp(before, after) {
  const reqs = after.map((a, i) => a.requests - before[i].requests);
  const bytes = after.map((a, i) => a.sent + a.received - before[i].sent - before[i].received);
  const avg = (xs) => xs.reduce((s, x) => s + x, 0) / Math.max(1, xs.length);
  return { hosts: after.length, requests: avg(reqs), bytes: Math.round(avg(bytes)), minBytes: Math.min(...bytes), maxBytes: Math.max(...bytes) };
}

/** Node names node-00000 … */
export function nodeNames(n) {
  return Array.from({ length: n }, (_, i) => `node-${String(i).padStart(5, '0')}`);
}

/** Bytes of a bare repo's object store (packs, their indexes and loose objects, by file size), and `git count-objects -v`. */
export function repoBytes(bare) {
  const walk = (dir) => readdirSync(dir, { withFileTypes: true }).reduce((n, e) => n + (e.isDirectory() ? walk(join(dir, e.name)) : statSync(join(dir, e.name)).size), 0);
  const counts = Object.fromEntries(git(bare, ['count-objects', '-v']).split('\n').map((l) => l.split(': ')));
  return { bytes: walk(join(bare, 'objects')), countObjects: counts };
}
