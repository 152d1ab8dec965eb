/**
 * Crash safety, with real processes killed by SIGKILL at exact points (MESH_FAULT, see
 * agent/fault.ts): at every resource boundary of a 50-resource pass, between an intent and its
 * change, in the middle of a file write, inside a batch of file writes, and while un-declaring. Each time the next pass must
 * converge (a third pass changes nothing), the root must match the declaration exactly, and the
 * owned set that `mesh-host state --json` shows must be exactly the declared ids; un-declaring
 * everything must then give pre-existing files their original content back and remove the rest.
 */
import { spawn } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MESH_HOST, newMachine, runProgram } from './helpers/fleet.js';
import { snapshot } from './helpers/snapshot.js';

const dir = mkdtempSync(join(tmpdir(), 'mesh-crash-'));

/** 50 resources: a pre-existing directory and 6 pre-existing files (one already as declared), and 43 new ones. */
function declaration(): { yaml: string; ids: string[] } {
  const r: string[] = [];
  const add = (type: string, path: string, extra = '') => r.push(`  - type: ${type}\n    path: ${path}\n${extra}`);
  add('directory', '/etc/app', '    mode: "0750"\n');
  for (const n of ['a', 'b', 'c', 'd']) add('file', `/etc/app/${n}.conf`, `    content: "managed ${n}\\n"\n    mode: "0640"\n`);
  add('file', '/etc/motd', '    content: "managed by mesh\\n"\n');
  add('file', '/etc/issue', '    content: "Debian 12\\n"\n    mode: "0644"\n');
  add('directory', '/srv/app');
  for (let d = 0; d < 4; d++) add('directory', `/srv/app/d${d}`, '    mode: "0755"\n');
  for (let f = 0; f < 38; f++) add('file', `/srv/app/d${f % 4}/f${f}.txt`, `    content: "${'line\\n'.repeat(f % 5)}file ${f}\\n"\n`);
  const ids = r.map((text) => `${/type: (\w+)/.exec(text)![1]}:${/path: (\S+)/.exec(text)![1]}`);
  return { yaml: `resources:\n${r.join('')}`, ids };
}

const { yaml, ids } = declaration();
const template = newMachine(join(dir, 'template'));
const bundle = join(dir, 'bundle');
const empty = join(dir, 'empty');
let expected: Record<string, string>;
let original: Record<string, string>;

interface Run {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
}

function host(root: string, args: string[], fault?: string): Promise<Run> {
  return new Promise((resolve) => {
    const env = { ...process.env, MESH_LOG_LEVEL: 'warn', ...(fault ? { MESH_FAULT: fault } : {}) };
    const proc = spawn('node', [MESH_HOST, ...args, '--root', root], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    proc.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    proc.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

const apply = (root: string, from = bundle, fault?: string) => host(root, ['apply', '--bundle', from, '--json'], fault);
const owned = async (root: string) => (JSON.parse((await host(root, ['state', '--json'])).stdout) as { owned: Array<{ id: string; state: string }> }).owned;

/** A fresh copy of the template machine. */
async function machine(name: string): Promise<string> {
  const root = join(dir, 'roots', name);
  expect((await runProgram('mkdir', ['-p', join(dir, 'roots')], dir)).code).toBe(0);
  expect((await runProgram('cp', ['-a', template, root], dir)).code).toBe(0);
  return root;
}

/** After a crash: the next pass converges, a third changes nothing, the root and the owned set are exactly the declaration. */
async function expectConverges(root: string, why: string): Promise<void> {
  const next = await apply(root);
  expect(next.stderr, why).toBe('');
  expect(next.code, `${why}: ${next.stdout}`).toBe(0);
  const store = join(root, 'var/lib/mesh-host/store.json');
  const written = statSync(store).mtimeMs;
  const third = JSON.parse((await apply(root)).stdout) as { outcome: string; resources: Array<{ id: string; result: string }> };
  expect(third.outcome, why).toBe('applied');
  expect(third.resources.filter((l) => l.result !== 'unchanged'), why).toEqual([]);
  expect(statSync(store).mtimeMs, `${why}: a pass that changes nothing writes nothing`).toBe(written);
  expect(existsSync(`${store}.journal`), why).toBe(false);
  expect(snapshot(root), why).toEqual(expected);
  expect(await owned(root), why).toEqual(ids.map((id) => ({ id, state: 'verified', at: expect.any(String) })));
}

/** Un-declaring everything restores what was there before mesh and removes the rest. */
async function expectUndeclares(root: string, why: string): Promise<void> {
  const run = await apply(root, empty);
  expect(run.code, `${why}: ${run.stdout}${run.stderr}`).toBe(0);
  expect(snapshot(root), why).toEqual(original);
  expect(await owned(root), why).toEqual([]);
}

/** Run `fn` over `items`, `n` at a time. */
async function pool<T>(items: T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  await Promise.all(Array.from({ length: n }, async () => {
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) await fn(item);
  }));
}

/** Kill a pass from the template at `fault`, then check that the next pass converges (and, with `undeclare`, un-declares). */
async function killThenConverge(fault: string, undeclare: boolean): Promise<void> {
  const root = await machine(fault.replace(':', '-'));
  const killed = await apply(root, bundle, fault);
  expect(killed.signal, `${fault}: the pass should have been killed: ${killed.stdout}${killed.stderr}`).toBe('SIGKILL');
  await expectConverges(root, fault);
  if (undeclare) await expectUndeclares(root, fault);
}

beforeAll(async () => {
  const etc = (path: string, text: string, mode: number) => writeFileSync(join(template, path), text, { mode });
  expect((await runProgram('mkdir', ['-m', '0755', join(template, 'etc/app')], dir)).code).toBe(0);
  for (const n of ['a', 'b', 'c', 'd']) etc(`etc/app/${n}.conf`, `original ${n}\nkey=${n}\n`, 0o600);
  etc('etc/motd', 'welcome to this machine\n', 0o644);
  etc('etc/issue', 'Debian 12\n', 0o644);
  expect((await runProgram('mkdir', ['-p', bundle, empty], dir)).code).toBe(0);
  writeFileSync(join(bundle, 'base.yaml'), yaml);
  writeFileSync(join(empty, 'base.yaml'), 'resources: []\n');
  original = snapshot(template);
  const clean = await machine('clean');
  const run = await apply(clean);
  expect(run.code, run.stdout + run.stderr).toBe(0);
  expected = snapshot(clean);
  expect(ids).toHaveLength(50);
  await expectUndeclares(clean, 'clean');
});

/** Un-declaring after recovery is what shows an orphan or a lost prior; it is checked on the pre-existing resources and every 4th. */
const undeclareAt = (k: number) => k <= 8 || k % 4 === 0;

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('a host killed at any instant converges on its next pass', () => {
  it('killed at every resource boundary (after each change is verified)', async () => {
    await pool(ids.map((_, i) => i + 1), 3, (k) => killThenConverge(`after-change:${k}`, undeclareAt(k)));
  }, 900_000);

  it('killed between every intent and its change', async () => {
    // /etc/issue is already as declared: it is adopted without an intent, so there are 49.
    await pool(ids.slice(1).map((_, i) => i + 1), 3, (k) => killThenConverge(`after-intent:${k}`, undeclareAt(k)));
  }, 900_000);

  it('killed in the middle of a file write, and of the store write at the end of the pass', async () => {
    // 43 files change (all but /etc/issue), then the store is written: write 44.
    await pool(['mid-write:1', 'mid-write:2', 'mid-write:6', 'mid-write:25', 'mid-write:43', 'mid-write:44'], 3, (fault) => killThenConverge(fault, true));
  }, 300_000);

  it('killed inside a batch of file writes: between files written to their temporary names, between renames, and before the store write', async () => {
    // Two batches: /etc/app's 4 files and /etc/motd (5, each fsynced), then the 38 files under /srv/app (one sync for all).
    // staged:1 is right after the batch's intents were synced; staged:5 and staged:43 end a batch, before its sync.
    const faults = ['staged:1', 'staged:3', 'staged:5', 'staged:6', 'staged:24', 'staged:43', 'renamed:1', 'renamed:5', 'renamed:6', 'renamed:30', 'renamed:43', 'before-save:1'];
    await pool(faults, 3, (fault) => killThenConverge(fault, true));
  }, 600_000);

  it('killed while un-declaring, at removals and in the middle of restoring a file', async () => {
    await pool(['after-drop:1', 'after-drop:13', 'after-drop:25', 'after-drop:46', 'after-drop:50', 'mid-write:1', 'mid-write:3'], 3, async (fault) => {
      const root = await machine(`undeclare-${fault.replace(':', '-')}`);
      expect((await apply(root)).code).toBe(0);
      const killed = await apply(root, empty, fault);
      expect(killed.signal, `${fault}: ${killed.stdout}${killed.stderr}`).toBe('SIGKILL');
      await expectUndeclares(root, fault);
    });
  }, 300_000);
});

describe('a store the host cannot read', () => {
  it('a garbage store.json makes the host refuse to change anything, with a message a person can act on', async () => {
    const root = await machine('garbage');
    expect((await apply(root)).code).toBe(0);
    const before = snapshot(root);
    for (const garbage of ['{"format": 1, "owned": [', '{"format": 1, "owned": {}}\n']) {
      writeFileSync(join(root, 'var/lib/mesh-host/store.json'), garbage);
      const run = await apply(root, empty);
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(/^mesh-host: the store .*store\.json cannot be read \(.*\)\. mesh-host will not change anything until a person looks: /);
      expect(snapshot(root)).toEqual(before);
    }
  });

  it('a journal line that is not a record refuses too; an incomplete last line (a torn append) is harmless', async () => {
    const root = await machine('journal');
    expect((await apply(root, bundle, 'after-change:20')).signal).toBe('SIGKILL');
    const journal = join(root, 'var/lib/mesh-host/store.json.journal');
    const lines = readFileSync(journal, 'utf8');
    appendFileSync(journal, '{"epoch":0,"put":{"id":"file:/srv/app/d0/f'); // torn: no newline
    const torn = snapshot(root);
    writeFileSync(journal, lines.replace(/\n/, '\nnot json\n'));
    const refused = await apply(root);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/store\.json\.journal line 2 cannot be read/);
    expect(snapshot(root)).toEqual(torn);
    writeFileSync(journal, lines + '{"epoch":0,"put":{"id":"file:/srv/app/d0/f');
    await expectConverges(root, 'torn journal');
  });

  it('temporary files left by an interrupted store write are harmless', async () => {
    const root = await machine('tmpfiles');
    expect((await apply(root)).code).toBe(0);
    writeFileSync(join(root, 'var/lib/mesh-host/.store.json.mesh-tmp'), '{"format": 1, "ow');
    writeFileSync(join(root, 'var/lib/mesh-host/.store.json.4242.tmp'), 'garbage');
    await expectConverges(root, 'left-over temporary files');
    await expectUndeclares(root, 'left-over temporary files');
  });
});
