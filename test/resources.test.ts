/**
 * Every resource type end to end: the built mesh-host applies a bundle to a temporary root
 * (`mesh-host apply --bundle DIR --root ROOT --json`, no git) and each line of its result is
 * checked against the root. Users and groups go through the real useradd/usermod/userdel/
 * groupadd/groupmod/groupdel chrooted into the root (`--root`); services through the real
 * `systemctl --root`. No systemd runs as PID 1 in this container, and under a --root other
 * than "/" there is never one to talk to, so a service's running state and restarts are
 * absent here: the host must say `unverified`, and these tests check that it does.
 */
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyPlan, observe } from '../agent/apply.js';
import { processRunner } from '../agent/exec.js';
import { noFaults } from '../agent/fault.js';
import { passContext, type Loaders } from '../agent/resources/handler.js';
import { plan } from '../core/plan.js';
import { handlerFor } from '../agent/resources/index.js';
import type { ServiceManager } from '../agent/resources/service.js';
import { openStore } from '../agent/store/store.js';
import type { HostConfig } from '../agent/config.js';
import { buildReport } from '../agent/report.js';
import type { Resource } from '../schema/declaration.js';
import type { ResourceResult } from '../schema/report.js';
import { hostCmd, MESH_HOST, newMachine, runProgram } from './helpers/fleet.js';
import { snapshot } from './helpers/snapshot.js';
import { writeAccounts } from './helpers/accounts.js';
import { tempDirs } from './helpers/tmp.js';

const tempDir = tempDirs();

const HOST_ACCOUNTS = ['/etc/passwd', '/etc/group', '/etc/shadow', '/etc/gshadow'];
const hashes = () => HOST_ACCOUNTS.map((f) => `${f} ${existsSync(f) ? createHash('sha256').update(readFileSync(f)).digest('hex') : 'missing'}`);
let hostBefore: string[];
beforeAll(() => void (hostBefore = hashes()));
afterAll(() => expect(hashes(), 'the machine running the tests must keep its own accounts').toEqual(hostBefore));

/**
 * A simulated machine with a minimal account database written from scratch (not the host's):
 * root, the users group, and `ops` (uid 1001), a user that was there before mesh.
 */
function machine(): string {
  const root = newMachine(join(tempDir('mesh-res-'), 'root')); // its bundle goes beside it, inside the same temporary folder
  writeAccounts(root);
  return root;
}

interface Line {
  id: string;
  result: string;
  drift?: boolean;
  changes?: string[];
  error?: string;
}
interface Body {
  outcome: string;
  errors: Array<{ file?: string; line?: number; col?: number; message: string }>;
  resources: Line[];
  counts?: Record<string, number>;
}

/** The bundle folder beside `root`, holding `resources` (the resources: list) and `files`. */
function bundleWith(root: string, resources: string, files: Record<string, string> = {}): string {
  const bundle = join(root, '..', `${root.split('/').pop()}-bundle`);
  rmSync(bundle, { recursive: true, force: true });
  mkdirSync(bundle);
  writeFileSync(join(bundle, 'base.yaml'), resources ? `resources:\n${resources}` : 'resources: []\n');
  for (const [name, text] of Object.entries(files)) writeFileSync(join(bundle, name), text);
  return bundle;
}

/** One pass of `yaml` (the resources: list) on `root`, with `files` beside the declaration; returns the exit code and the parsed result. */
async function apply(root: string, resources: string, files: Record<string, string> = {}): Promise<{ code: number; body: Body }> {
  const bundle = bundleWith(root, resources, files);
  const run = await hostCmd(root, 'apply', '--bundle', bundle, '--json');
  if (!run.stdout.trim()) throw new Error(`mesh-host apply printed nothing (exit ${run.code}): ${run.stderr}`);
  return { code: run.code, body: JSON.parse(run.stdout) as Body };
}

/** An empty declaration: everything the host owns is un-declared. */
const NOTHING = '';
const lineOf = (body: Body, id: string) => body.resources.find((l) => l.id === id);
const etcLine = (root: string, file: string, name: string) => readFileSync(join(root, 'etc', file), 'utf8').split('\n').find((l) => l.startsWith(`${name}:`));
const onRoot = (root: string, cmd: string, ...args: string[]) => runProgram(cmd, ['--root', root, ...args], root);

describe('file', () => {
  const conf = (extra: string) => `  - type: file\n    path: /etc/app.conf\n${extra}`;
  const stat = (root: string, path: string) => lstatSync(join(root, path));

  it('is created with its content, mode, owner and group, read back, and unchanged on the next pass', async () => {
    const root = machine();
    const decl = conf('    content: "port = 80\\n"\n    mode: "0640"\n    owner: ops\n    group: users\n');
    const first = await apply(root, decl);
    expect(first.code).toBe(0);
    expect(first.body.resources).toEqual([expect.objectContaining({ id: 'file:/etc/app.conf', result: 'created' })]);
    expect(readFileSync(join(root, 'etc/app.conf'), 'utf8')).toBe('port = 80\n');
    expect(stat(root, 'etc/app.conf')).toMatchObject({ uid: 1001, gid: 100 });
    expect(stat(root, 'etc/app.conf').mode & 0o7777).toBe(0o640);
    expect((await apply(root, decl)).body.resources).toEqual([{ id: 'file:/etc/app.conf', result: 'unchanged' }]);
  });

  it('takes its content from a source file beside the declaration', async () => {
    const root = machine();
    const { code, body } = await apply(root, conf('    source: app.conf\n'), { 'app.conf': '[app]\nport = 8080\n' });
    expect(code, JSON.stringify(body)).toBe(0);
    expect(readFileSync(join(root, 'etc/app.conf'), 'utf8')).toBe('[app]\nport = 8080\n');
    const missing = await apply(root, conf('    source: nowhere.conf\n'));
    expect(missing.code).not.toBe(0);
    expect(missing.body.errors.map((e) => e.message).join('\n')).toMatch(/nowhere\.conf/);
    expect(readFileSync(join(root, 'etc/app.conf'), 'utf8')).toBe('[app]\nport = 8080\n');
  });

  it('edited and chmodded by hand, is repaired on the next pass with drift: true', async () => {
    const root = machine();
    const decl = conf('    content: "port = 80\\n"\n    mode: "0644"\n');
    await apply(root, decl);
    writeFileSync(join(root, 'etc/app.conf'), 'port = 9999\n');
    const { body } = await apply(root, decl);
    expect(body.resources).toEqual([expect.objectContaining({ id: 'file:/etc/app.conf', result: 'updated', drift: true, changes: ['content differs'] })]);
    expect(readFileSync(join(root, 'etc/app.conf'), 'utf8')).toBe('port = 80\n');
    const { chmodSync } = await import('node:fs');
    chmodSync(join(root, 'etc/app.conf'), 0o600);
    expect((await apply(root, decl)).body.resources).toEqual([expect.objectContaining({ result: 'updated', drift: true, changes: ['mode 0600 → 0644'] })]);
    expect(stat(root, 'etc/app.conf').mode & 0o7777).toBe(0o644);
  });

  it('with check, new content is checked where it is staged before it takes the file\'s place (as Puppet\'s validate_cmd): refused, the file is left as it was', async () => {
    const root = machine();
    const checked = (port: string, check = `'grep -qx "port = [0-9]*" "$1" || { echo "$1: no port number" >&2; exit 1; }'`) =>
      conf(`    content: "port = ${port}\\n"\n    mode: "0644"\n    check: [sh, -c, ${check}, sh, "%"]\n`);
    expect((await apply(root, checked('80'))).body.resources).toEqual([expect.objectContaining({ id: 'file:/etc/app.conf', result: 'created' })]);
    expect(readFileSync(join(root, 'etc/app.conf'), 'utf8')).toBe('port = 80\n');

    const refused = await apply(root, checked('eighty'));
    expect(refused.code).toBe(1);
    expect(refused.body.resources).toEqual([
      {
        id: 'file:/etc/app.conf',
        result: 'failed',
        changes: ['content differs'],
        error: `check [sh, -c, grep -qx "port = [0-9]*" "$1" || { echo "$1: no port number" >&2; exit 1; }, sh, %] refused the new content of /etc/app.conf (exited 1: ${join(root, 'etc/.app.conf.mesh-tmp')}: no port number); /etc/app.conf is left as it was; the next pass tries again`,
      },
    ]);
    expect(readFileSync(join(root, 'etc/app.conf'), 'utf8')).toBe('port = 80\n');
    expect(readdirSync(join(root, 'etc')).filter((f) => f.includes('mesh-tmp'))).toEqual([]);

    // Only new content is checked: a mode put back, or content that is already there, runs no check.
    const { chmodSync } = await import('node:fs');
    chmodSync(join(root, 'etc/app.conf'), 0o600);
    expect((await apply(root, checked('80', "'exit 1'"))).body.resources).toEqual([expect.objectContaining({ result: 'updated', changes: ['mode 0600 → 0644'] })]);
    const fresh = machine();
    expect((await apply(fresh, checked('80', "'exit 2'"))).body.resources).toEqual([expect.objectContaining({ result: 'failed', error: expect.stringContaining('(exited 2); /etc/app.conf is not made') })]);
    expect(existsSync(join(fresh, 'etc/app.conf'))).toBe(false);

    const unnamed = await apply(root, conf('    content: "x"\n    check: [visudo, -cf]\n'));
    expect(unnamed.body.errors.map((e) => e.message)).toEqual([expect.stringContaining("check names the new content with the argument %, as in [visudo, -cf, '%']")]);
  });

  it('ensure: absent deletes it, and a second pass changes nothing', async () => {
    const root = machine();
    writeFileSync(join(root, 'etc/old.conf'), 'stale\n');
    const decl = '  - type: file\n    path: /etc/old.conf\n    ensure: absent\n';
    expect((await apply(root, decl)).body.resources).toEqual([{ id: 'file:/etc/old.conf', result: 'updated', changes: ['file exists, should be absent'] }]);
    expect(existsSync(join(root, 'etc/old.conf'))).toBe(false);
    expect((await apply(root, decl)).body.resources).toEqual([{ id: 'file:/etc/old.conf', result: 'unchanged' }]);
  });

  it('un-declared, gives a file that was there before mesh its original content and mode back, and deletes one mesh created', async () => {
    const root = machine();
    writeFileSync(join(root, 'etc/app.conf'), 'original\n', { mode: 0o600 });
    await apply(root, conf('    content: "managed\\n"\n    mode: "0644"\n') + '  - type: file\n    path: /etc/new.conf\n    content: "new\\n"\n');
    expect(readFileSync(join(root, 'etc/app.conf'), 'utf8')).toBe('managed\n');
    const { body } = await apply(root, NOTHING);
    expect(body.resources).toEqual([
      expect.objectContaining({ id: 'file:/etc/new.conf', result: 'removed' }),
      expect.objectContaining({ id: 'file:/etc/app.conf', result: 'restored' }),
    ]);
    expect(readFileSync(join(root, 'etc/app.conf'), 'utf8')).toBe('original\n');
    expect(stat(root, 'etc/app.conf').mode & 0o7777).toBe(0o600);
    expect(existsSync(join(root, 'etc/new.conf'))).toBe(false);
  });
});

describe('a resource that failed and is then dropped', () => {
  it('is reported as dropped, not removed, and counts no change', async () => {
    const root = machine();
    const failed = await apply(root, '  - type: file\n    path: /srv/missing/app.conf\n    content: "x\\n"\n');
    expect(lineOf(failed.body, 'file:/srv/missing/app.conf')).toMatchObject({ result: 'failed' });
    const dropped = await apply(root, NOTHING);
    expect(dropped.code).toBe(0);
    expect(dropped.body.resources).toEqual([{ id: 'file:/srv/missing/app.conf', result: 'dropped', changes: ['its change never completed: undone, and no longer declared'] }]);
    expect(dropped.body.counts).toMatchObject({ changed: 0, failed: 0 });
  });

  it('a folder where a file is declared: the failed change is said as such by state, and dropping it leaves the folder as it is', async () => {
    const root = machine();
    mkdirSync(join(root, 'etc/app.d'));
    writeFileSync(join(root, 'etc/app.d/keep'), 'not mesh\n');
    const failed = await apply(root, '  - type: file\n    path: /etc/app.d\n    content: "x\\n"\n');
    expect(lineOf(failed.body, 'file:/etc/app.d')).toMatchObject({ result: 'failed', error: '/etc/app.d is a directory, not a file: remove it or declare it as what it is' });
    // No report (the host is not enrolled) says whether the change failed or the host stopped in it: state says either.
    const state = await hostCmd(root, 'state');
    expect(state.stdout.split('\n').slice(-3)).toEqual(['owned (1):', '  file:/etc/app.d (its last change did not complete: it failed, or the host stopped in it; the next pass tries again)', '']);
    const dropped = await apply(root, NOTHING);
    expect(dropped.body.resources).toEqual([{ id: 'file:/etc/app.d', result: 'dropped', changes: ['left /etc/app.d as it is: it is what was there before mesh took it over'] }]);
    expect(readFileSync(join(root, 'etc/app.d/keep'), 'utf8')).toBe('not mesh\n');
  });
});

describe('directory', () => {
  const dir = (path: string, extra = '') => `  - type: directory\n    path: ${path}\n${extra}`;

  it('with purge: true, moves every file and link in it that is not declared to the state folder, leaves folders, and does so again as drift', async () => {
    const root = machine();
    mkdirSync(join(root, 'etc/sudoers.d/sub'), { recursive: true });
    writeFileSync(join(root, 'etc/sudoers.d/old'), 'old\n');
    writeFileSync(join(root, 'etc/sudoers.d/sub/keep'), 'keep\n');
    symlinkSync('/nowhere', join(root, 'etc/sudoers.d/link'));
    const decl = dir('/etc/sudoers.d', '    purge: true\n') + '  - type: file\n    path: /etc/sudoers.d/ops\n    content: "%ops ALL=(ALL) ALL\\n"\n';
    const first = await apply(root, decl);
    expect(first.body.resources).toEqual([
      { id: 'directory:/etc/sudoers.d', result: 'updated', changes: ['purge: link, old are not declared (moved to /var/lib/mesh-host/purged/)'] },
      { id: 'file:/etc/sudoers.d/ops', result: 'created', changes: ['absent, should be a file'] },
    ]);
    expect(readdirSync(join(root, 'etc/sudoers.d')).sort()).toEqual(['ops', 'sub']);
    const [kept] = readdirSync(join(root, 'var/lib/mesh-host/purged'));
    expect(readFileSync(join(root, 'var/lib/mesh-host/purged', kept!, 'etc/sudoers.d/old'), 'utf8')).toBe('old\n');
    expect(readlinkSync(join(root, 'var/lib/mesh-host/purged', kept!, 'etc/sudoers.d/link'))).toBe('/nowhere');
    expect((await apply(root, decl)).body.resources.map((l) => l.result)).toEqual(['unchanged', 'unchanged']);
    writeFileSync(join(root, 'etc/sudoers.d/dropped-in'), 'x\n');
    expect((await apply(root, decl)).body.resources[0]).toEqual({ id: 'directory:/etc/sudoers.d', result: 'updated', changes: ['purge: dropped-in is not declared (moved to /var/lib/mesh-host/purged/)'], drift: true });
    expect(readdirSync(join(root, 'etc/sudoers.d')).sort()).toEqual(['ops', 'sub']);
    expect((await apply(root, dir('/etc/sudoers.d', '    purge: true\n    ensure: absent\n'))).body.errors.map((e) => e.message)).toEqual([expect.stringContaining('resources.0.purge: purge empties a directory that stays: drop purge, or ensure: absent')]);
  });

  it('keeps what it purged for 30 days: a pass removes older sets (and nothing else in the folder), and state says what is kept', async () => {
    const root = machine();
    const purged = join(root, 'var/lib/mesh-host/purged');
    const old = new Date(Date.now() - 31 * 86_400_000).toISOString().replace(/:/g, '-');
    const recent = new Date(Date.now() - 29 * 86_400_000).toISOString().replace(/:/g, '-');
    for (const set of [old, recent]) {
      mkdirSync(join(purged, set, 'etc/sudoers.d'), { recursive: true });
      writeFileSync(join(purged, set, 'etc/sudoers.d/old-admin'), 'admin ALL=(ALL) ALL\n');
    }
    mkdirSync(join(purged, 'mine')); // not a set's name: someone's own
    const decl = dir('/etc/sudoers.d', '    purge: true\n');
    mkdirSync(join(root, 'etc/sudoers.d'));
    writeFileSync(join(root, 'etc/sudoers.d/stray'), 'x\n');
    expect((await apply(root, decl)).code).toBe(0);
    const sets = readdirSync(purged).sort();
    expect(sets).toHaveLength(3);
    expect(sets).not.toContain(old);
    expect(sets).toEqual(expect.arrayContaining([recent, 'mine']));
    const state = await hostCmd(root, 'state');
    expect(state.stdout).toContain(`purged: 2 files (22 bytes) kept in ${purged}, the oldest from ${new Date(recent.replace(/^(\d{4}-\d\d-\d\dT\d\d)-(\d\d)-/, '$1:$2:')).toISOString()}; each is removed 30 days after it was purged`);
    expect(JSON.parse((await hostCmd(root, 'state', '--json')).stdout).purged).toMatchObject({ files: 2, bytes: 22 });
  });

  it('declared absent while it holds something, fails naming what it holds and what to do, and removes nothing', async () => {
    const root = machine();
    mkdirSync(join(root, 'srv/old/sub'), { recursive: true });
    for (const f of ['a', 'b', 'c', 'd']) writeFileSync(join(root, 'srv/old', f), 'x\n');
    const { body } = await apply(root, dir('/srv/old', '    ensure: absent\n'));
    expect(body.resources).toEqual([{ id: 'directory:/srv/old', result: 'failed', changes: ['directory exists, should be absent'], error: '/srv/old is not empty (/srv/old/a, /srv/old/b, /srv/old/c and 2 more); mesh removes only empty directories: declare what it holds absent too, or remove it by hand' }]);
    expect(existsSync(join(root, 'srv/old/sub'))).toBe(true);
  });

  it('is created with its mode and owner, read back, and a mode changed by hand is repaired as drift', async () => {
    const root = machine();
    const decl = dir('/srv/app', '    mode: "0750"\n    owner: ops\n');
    expect((await apply(root, decl)).body.resources).toEqual([expect.objectContaining({ id: 'directory:/srv/app', result: 'created' })]);
    expect(lstatSync(join(root, 'srv/app')).isDirectory()).toBe(true);
    expect(lstatSync(join(root, 'srv/app')).mode & 0o7777).toBe(0o750);
    expect(lstatSync(join(root, 'srv/app')).uid).toBe(1001);
    expect((await apply(root, decl)).body.resources).toEqual([{ id: 'directory:/srv/app', result: 'unchanged' }]);
    const { chmodSync } = await import('node:fs');
    chmodSync(join(root, 'srv/app'), 0o777);
    expect((await apply(root, decl)).body.resources).toEqual([expect.objectContaining({ result: 'updated', drift: true })]);
    expect(lstatSync(join(root, 'srv/app')).mode & 0o7777).toBe(0o750);
  });

  it('un-declared, is removed when mesh created it, and kept with its old mode when it was there before', async () => {
    const root = machine();
    mkdirSync(join(root, 'srv/data'), { recursive: true, mode: 0o700 });
    await apply(root, dir('/srv/app') + dir('/srv/data', '    mode: "0755"\n'));
    expect(lstatSync(join(root, 'srv/data')).mode & 0o7777).toBe(0o755);
    const { body } = await apply(root, NOTHING);
    expect(body.resources.map((l) => [l.id, l.result])).toEqual([['directory:/srv/data', 'restored'], ['directory:/srv/app', 'removed']]);
    expect(existsSync(join(root, 'srv/app'))).toBe(false);
    expect(lstatSync(join(root, 'srv/data')).mode & 0o7777).toBe(0o700);
  });

  it('is made before what it holds wherever it is declared (like Puppet autorequire), and removed after it', async () => {
    const root = machine();
    const decl = '  - type: file\n    path: /srv/shop/conf/app.ini\n    content: "port = 80\\n"\n' + '  - type: symlink\n    path: /srv/shop/current\n    target: conf\n' + dir('/srv/shop/conf') + dir('/srv/shop', '    mode: "0750"\n');
    // --noop lists them in the order the pass takes them.
    const bundle = join(root, '..', `${root.split('/').pop()}-bundle`);
    mkdirSync(bundle, { recursive: true });
    writeFileSync(join(bundle, 'base.yaml'), `resources:\n${decl}`);
    const noop = await hostCmd(root, 'apply', '--bundle', bundle, '--noop', '--json');
    expect(noop.code).toBe(4);
    expect((JSON.parse(noop.stdout) as { changes: Array<{ id: string }> }).changes.map((l) => l.id)).toEqual(['directory:/srv/shop', 'directory:/srv/shop/conf', 'file:/srv/shop/conf/app.ini', 'symlink:/srv/shop/current']);
    const first = await apply(root, decl);
    expect(first.code).toBe(0);
    expect(first.body.resources.map((l) => `${l.id} ${l.result}`)).toEqual(['directory:/srv/shop created', 'directory:/srv/shop/conf created', 'file:/srv/shop/conf/app.ini created', 'symlink:/srv/shop/current created']);
    expect(readFileSync(join(root, 'srv/shop/current/app.ini'), 'utf8')).toBe('port = 80\n');
    expect((await apply(root, decl)).body.resources.every((l) => l.result === 'unchanged')).toBe(true);
    const { code, body } = await apply(root, NOTHING);
    expect(code).toBe(0);
    expect(body.resources.map((l) => `${l.id} ${l.result}`)).toEqual(['symlink:/srv/shop/current removed', 'file:/srv/shop/conf/app.ini removed', 'directory:/srv/shop/conf removed', 'directory:/srv/shop removed']);
    expect(existsSync(join(root, 'srv/shop'))).toBe(false);
  });

  it('that fails leaves what needs it skipped, naming it, as Puppet skips what requires a failed resource; the next pass makes all', async () => {
    const root = machine();
    // /data is neither on the machine nor declared: its directory fails, and what is in it is not tried.
    const decl = dir('/data/app') + dir('/data/app/conf') + '  - type: file\n    path: /data/app/conf/app.ini\n    content: "port = 80\\n"\n' + '  - type: file\n    path: /srv/other.ini\n    content: "x\\n"\n';
    const first = await apply(root, decl);
    expect(first.code).toBe(1);
    expect(first.body.outcome).toBe('failed');
    expect(first.body.resources.map((l) => `${l.id} ${l.result}`)).toEqual(['directory:/data/app failed', 'directory:/data/app/conf skipped', 'file:/data/app/conf/app.ini skipped', 'file:/srv/other.ini created']);
    expect(lineOf(first.body, 'directory:/data/app')!.error).toContain('parent directory of /data/app does not exist');
    expect(lineOf(first.body, 'directory:/data/app/conf')!.error).toBe('not applied, because what it needs did not apply in this pass: directory:/data/app failed; the next pass tries again');
    expect(lineOf(first.body, 'file:/data/app/conf/app.ini')!.error).toContain('directory:/data/app/conf was not applied either');
    expect(lineOf(first.body, 'file:/data/app/conf/app.ini')!.changes).toEqual(['absent, should be a file']);
    expect(first.body.counts).toMatchObject({ changed: 1, failed: 1 });
    mkdirSync(join(root, 'data'));
    const second = await apply(root, decl);
    expect(second.code).toBe(0);
    expect(second.body.resources.map((l) => `${l.id} ${l.result}`)).toEqual(['directory:/data/app created', 'directory:/data/app/conf created', 'file:/data/app/conf/app.ini created', 'file:/srv/other.ini unchanged']);
    // What it made, it owns: un-declared, all of it goes, and /data (the machine's own) stays.
    const gone = await apply(root, NOTHING);
    expect(gone.code).toBe(0);
    expect(existsSync(join(root, 'data/app'))).toBe(false);
    expect(existsSync(join(root, 'data'))).toBe(true);
  });
});

describe('symlink', () => {
  const link = (target: string) => `  - type: symlink\n    path: /etc/app\n    target: ${target}\n`;

  it('is created, read back with lstat, and unchanged on the next pass', async () => {
    const root = machine();
    const first = await apply(root, link('/srv/app'));
    expect(first.body.resources).toEqual([{ id: 'symlink:/etc/app', result: 'created', changes: ['absent, should be a symlink to /srv/app'] }]);
    expect(readlinkSync(join(root, 'etc/app'))).toBe('/srv/app');
    expect((await apply(root, link('/srv/app'))).body.resources).toEqual([{ id: 'symlink:/etc/app', result: 'unchanged' }]);
  });

  it('pointed elsewhere by hand, is repaired on the next pass with drift: true', async () => {
    const root = machine();
    await apply(root, link('/srv/app'));
    unlinkSync(join(root, 'etc/app'));
    symlinkSync('/tmp', join(root, 'etc/app'));
    const { body } = await apply(root, link('/srv/app'));
    expect(body.resources).toEqual([{ id: 'symlink:/etc/app', result: 'updated', changes: ['target /tmp → /srv/app'], drift: true }]);
    expect(body.counts).toMatchObject({ changed: 1, drift: 1 });
    expect(readlinkSync(join(root, 'etc/app'))).toBe('/srv/app');
  });

  it('un-declared, is removed when the host made it and gives back the file it replaced', async () => {
    const root = machine();
    writeFileSync(join(root, 'etc/app'), 'original\n', { mode: 0o640 });
    await apply(root, link('/srv/app') + link('/srv/other').replace('/etc/app', '/etc/app2'));
    expect(lstatSync(join(root, 'etc/app')).isSymbolicLink()).toBe(true);
    const { body } = await apply(root, NOTHING);
    expect(body.resources).toEqual([
      { id: 'symlink:/etc/app2', result: 'removed' },
      { id: 'symlink:/etc/app', result: 'restored', changes: ['restored /etc/app to what was there before mesh took it over'] },
    ]);
    expect(existsSync(join(root, 'etc/app2'))).toBe(false);
    expect(readFileSync(join(root, 'etc/app'), 'utf8')).toBe('original\n');
    expect(lstatSync(join(root, 'etc/app')).mode & 0o7777).toBe(0o640);
  });

  it('is never written through a symlinked folder', async () => {
    const root = machine();
    const outside = tempDir('mesh-outside-');
    symlinkSync(outside, join(root, 'etc/escape'));
    const { code, body } = await apply(root, link('/srv/app').replace('/etc/app', '/etc/escape/app'));
    expect(code).toBe(1);
    expect(body.resources).toEqual([{ id: 'symlink:/etc/escape/app', result: 'failed', error: expect.stringMatching(/^cannot read current state: .*the parent \/etc\/escape is a symlink/) }]);
    expect(snapshot(outside)).toEqual({});
  });
});

describe('group', () => {
  const group = (name: string, gid: number) => `  - type: group\n    name: ${name}\n    gid: ${gid}\n`;

  it('is created with groupadd inside the root, read back from its etc/group, and unchanged next pass', async () => {
    const root = machine();
    const { body } = await apply(root, group('web', 3000) + '  - type: group\n    name: svc\n    system: true\n');
    expect(body.resources).toEqual([
      { id: 'group:web', result: 'created', changes: ['absent, should exist'] },
      { id: 'group:svc', result: 'created', changes: ['absent, should exist'] },
    ]);
    expect(etcLine(root, 'group', 'web')).toBe('web:x:3000:');
    expect(etcLine(root, 'group', 'svc')).toBe('svc:x:999:'); // the system range from the root's own login.defs
    expect(etcLine(root, 'gshadow', 'web')).toBe('web:!::');
    expect((await apply(root, group('web', 3000))).body.resources[0]).toEqual({ id: 'group:web', result: 'unchanged' });
  });

  it('with its gid changed by hand, is repaired on the next pass with drift: true', async () => {
    const root = machine();
    await apply(root, group('web', 3000));
    expect((await onRoot(root, 'groupmod', '--gid', '3100', 'web')).code).toBe(0);
    const { body } = await apply(root, group('web', 3000));
    expect(body.resources).toEqual([{ id: 'group:web', result: 'updated', changes: ['gid 3100 → 3000'], drift: true }]);
    expect(etcLine(root, 'group', 'web')).toBe('web:x:3000:');
  });

  it('un-declared, is deleted when the host created it; a group that was there before keeps existing with its gid', async () => {
    const root = machine();
    await apply(root, group('web', 3000) + group('ops', 1500));
    expect(etcLine(root, 'group', 'ops')).toBe('ops:x:1500:');
    const { body } = await apply(root, NOTHING);
    expect(body.resources).toEqual([
      { id: 'group:ops', result: 'restored', changes: ['restored group ops to gid 1001'] },
      { id: 'group:web', result: 'removed' },
    ]);
    expect(etcLine(root, 'group', 'web')).toBeUndefined();
    expect(etcLine(root, 'group', 'ops')).toBe('ops:x:1001:');
  });
});

describe('user', () => {
  const alice = (shell = '/bin/bash') =>
    `  - type: group\n    name: web\n    gid: 3000\n  - type: user\n    name: alice\n    uid: 2500\n    group: web\n    groups: [users, ops]\n    home: /home/alice\n    shell: ${shell}\n`;

  it('is created with useradd inside the root and read back from its etc/passwd and etc/group', async () => {
    const root = machine();
    const { body } = await apply(root, alice());
    expect(body.resources).toEqual([
      { id: 'group:web', result: 'created', changes: ['absent, should exist'] },
      { id: 'user:alice', result: 'created', changes: ['absent, should exist'] },
    ]);
    expect(etcLine(root, 'passwd', 'alice')).toBe('alice:x:2500:3000::/home/alice:/bin/bash');
    expect([etcLine(root, 'group', 'users'), etcLine(root, 'group', 'ops')]).toEqual(['users:x:100:alice', 'ops:x:1001:alice']);
    expect(etcLine(root, 'shadow', 'alice')).toMatch(/^alice:!:\d+:/);
    expect(existsSync(join(root, 'home/alice'))).toBe(false); // homes are declared as directories, never made behind the user's back
    expect((await apply(root, alice())).body.resources.map((l) => l.result)).toEqual(['unchanged', 'unchanged']);
  });

  it('with its shell and groups changed by hand, is repaired on the next pass with drift: true', async () => {
    const root = machine();
    await apply(root, alice());
    expect((await onRoot(root, 'usermod', '--shell', '/bin/sh', '--groups', 'users', 'alice')).code).toBe(0);
    const { body } = await apply(root, alice());
    expect(lineOf(body, 'user:alice')).toEqual({ id: 'user:alice', result: 'updated', changes: ['shell /bin/sh → /bin/bash', 'groups users → ops,users'], drift: true });
    expect(etcLine(root, 'passwd', 'alice')).toBe('alice:x:2500:3000::/home/alice:/bin/bash');
  });

  it('sets its comment and password hash, repairs them when changed by hand, and never shows the hash, on a command line either', async () => {
    const hash = '$6$meshsalt$u8jsb1/K9dnE8n3tQPwbHYDR2yRzOVqbpy6.h7lWkFM.5nPM1Copm7C0lZ1dLomFFurj7cIfnXoKNsotqJIxk.';
    const other = '$6$othersalt$EZtx4LFMZqJqpkDzicWTmsiow8KfL5uBgpazHAMx8kV.YQmlwOahpKARkeznLitkLjAyLHFY0Xn8S/r8bRpD/1';
    const declared = (comment: string) => `${alice()}    comment: ${comment}\n    password: '${hash}'\n` + `  - type: user\n    name: ops\n    password: '${hash}'\n`;
    const root = machine();
    // The shadow tools the host runs, each command line logged (as any local user could read it in /proc).
    const shims = join(root, '..', 'shims');
    mkdirSync(shims);
    const log = join(root, '..', 'argv.log');
    for (const tool of ['useradd', 'usermod', 'userdel', 'groupadd', 'chpasswd']) {
      writeFileSync(join(shims, tool), `#!/bin/sh\necho "${tool} $*" >> ${log}\nexec /usr/sbin/${tool} "$@"\n`, { mode: 0o755 });
    }
    const pass = async (resources: string) => {
      const run = await runProgram('node', [MESH_HOST, 'apply', '--bundle', bundleWith(root, resources), '--json', '--root', root], root, { PATH: `${shims}:${process.env.PATH}` });
      expect(run.stdout + run.stderr).not.toContain('$6$');
      return JSON.parse(run.stdout) as Body;
    };
    const created = await pass(declared('Alice Liddell'));
    expect(created.resources.map((l) => `${l.id} ${l.result}`)).toEqual(['group:web created', 'user:alice created', 'user:ops updated']);
    expect(lineOf(created, 'user:ops')!.changes).toEqual(['password changed']);
    expect(etcLine(root, 'passwd', 'alice')).toBe('alice:x:2500:3000:Alice Liddell:/home/alice:/bin/bash');
    expect(etcLine(root, 'shadow', 'alice')!.split(':')[1]).toBe(hash);
    expect(etcLine(root, 'shadow', 'ops')!.split(':')[1]).toBe(hash);
    expect((await pass(declared('Alice Liddell'))).resources.map((l) => l.result)).toEqual(['unchanged', 'unchanged', 'unchanged']);
    expect((await onRoot(root, 'usermod', '--password', other, '--comment', 'somebody', 'alice')).code).toBe(0);
    const repaired = await pass(declared('Alice Liddell'));
    expect(lineOf(repaired, 'user:alice')).toEqual({ id: 'user:alice', result: 'updated', changes: ['comment "somebody" → "Alice Liddell"', 'password changed'], drift: true });
    expect(etcLine(root, 'shadow', 'alice')!.split(':')[1]).toBe(hash);
    // The store keeps what ops had before (to put it back); the report's copy of the owned set carries no hash.
    const store = openStore(join(root, 'var/lib/mesh-host/store.json'));
    expect(store.owned('user:ops')?.resource.password).toBe(hash);
    const config = { node: 'web-1', generation: 1, nodeKey: 'ssh-ed25519 AAAA', vouch: null } as unknown as HostConfig;
    const report = buildReport(config, store, { kind: 'reconcile', commit: '0'.repeat(40), digest: 'x', outcome: 'applied', errors: [], resources: [] }, new Date());
    expect(report.owned.map((o) => o.id)).toEqual(['group:web', 'user:alice', 'user:ops']);
    expect(JSON.stringify(report)).not.toContain('$6$');
    // Un-declared, ops gets the hash it had before back (none: !).
    const undeclared = await pass(alice());
    expect(lineOf(undeclared, 'user:ops')).toEqual({ id: 'user:ops', result: 'restored', changes: ['restored user ops: password changed'] });
    expect(etcLine(root, 'shadow', 'ops')!.split(':')[1]).toBe('!');
    const argv = readFileSync(log, 'utf8');
    expect(argv.split('\n').filter((l) => l.startsWith('chpasswd'))).toEqual(Array(4).fill(`chpasswd --root ${root} --encrypted`));
    expect(argv).not.toContain('$6$');
    // Declared again, deleted by hand, then un-declared: ops is made again as it was before, its hash with it.
    await pass(declared('Alice Liddell'));
    expect((await onRoot(root, 'userdel', 'ops')).code).toBe(0);
    const remade = await pass(alice());
    expect(lineOf(remade, 'user:ops')).toEqual({ id: 'user:ops', result: 'restored', changes: ['re-created user ops with its earlier uid, groups, home, shell, comment and password'] });
    expect(etcLine(root, 'shadow', 'ops')!.split(':')[1]).toBe('!');
  });

  it('refuses a password that is not a hash, and a comment with a colon, naming the line', async () => {
    const root = machine();
    const run = await hostCmd(root, 'apply', '--bundle', bundleWith(root, '  - type: user\n    name: bob\n    password: hunter2\n    comment: "a:b"\n'), '--json');
    expect(run.code).toBe(1);
    const messages = (JSON.parse(run.stdout) as Body).errors.map((e) => `${e.line}:${e.col} ${e.message}`);
    expect(messages).toEqual([
      "4:15 resources.0.password: password is the hash etc/shadow holds, as 'openssl passwd -6' or 'mkpasswd -m yescrypt' prints it (starting with $), or ! for no password: never the password itself",
      '5:14 resources.0.comment: a comment is one line without a colon (etc/passwd separates its fields with colons)',
    ]);
    expect(etcLine(root, 'passwd', 'bob')).toBeUndefined();
  });

  it('un-declared, is deleted when the host created it; a user that was there before gets its old fields back', async () => {
    const root = machine();
    await apply(root, alice() + '  - type: user\n    name: ops\n    shell: /bin/bash\n    groups: [users]\n');
    expect(etcLine(root, 'passwd', 'ops')).toBe('ops:x:1001:1001::/home/ops:/bin/bash');
    const { body } = await apply(root, NOTHING);
    expect(body.resources).toEqual([
      { id: 'user:ops', result: 'restored', changes: ['restored user ops: shell /bin/bash → /bin/sh; groups users → (none)'] },
      { id: 'user:alice', result: 'removed' },
      { id: 'group:web', result: 'removed' },
    ]);
    expect(etcLine(root, 'passwd', 'alice')).toBeUndefined();
    expect(etcLine(root, 'passwd', 'ops')).toBe('ops:x:1001:1001::/home/ops:/bin/sh');
    expect(etcLine(root, 'group', 'users')).toBe('users:x:100:');
  });

  it('can own a file in the same pass even when declared after it (users go first, like Puppet autorequire)', async () => {
    const root = machine();
    const { body } = await apply(root, '  - type: file\n    path: /etc/alice.conf\n    content: "x\\n"\n    owner: alice\n    group: alice\n  - type: user\n    name: alice\n');
    expect(body.resources.map((l) => `${l.id} ${l.result}`)).toEqual(['user:alice created', 'file:/etc/alice.conf created']);
    expect(lstatSync(join(root, 'etc/alice.conf')).uid).toBe(Number(etcLine(root, 'passwd', 'alice')!.split(':')[2]));
  });
});

describe('service', () => {
  /** A unit file written straight into the root, as a package would install it. */
  function withUnit(root: string, dir = 'etc/systemd/system'): string {
    mkdirSync(join(root, dir), { recursive: true });
    writeFileSync(join(root, dir, 'demo.service'), '[Unit]\nDescription=demo\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n');
    return root;
  }
  const wants = (root: string) => join(root, 'etc/systemd/system/multi-user.target.wants/demo.service');
  // The wants link is absolute inside the root, so it is checked with lstat, never followed on the test machine.
  const enabledLink = (root: string) => lstatSync(wants(root), { throwIfNoEntry: false })?.isSymbolicLink() ?? false;
  const service = (extra = '') => `  - type: service\n    name: demo\n    enabled: true\n${extra}`;

  /** Passes in this process on `root` with a simulated running systemd (none runs in this container): each applies the resources given and returns its lines. */
  function inProcess(root: string, systemd: ServiceManager): (resources: Resource[]) => Promise<ResourceResult[]> {
    const none = async (): Promise<never> => {
      throw new Error('this pass loads nothing');
    };
    const load: Loaders = { parser: none, storeChecks: none, readConfig: none, hostUpgrade: none };
    const store = openStore(join(root, 'var/lib/mesh-host/store.json'));
    return async (resources) => {
      // Each pass its own context, as the host opens one a pass.
      const ctx = { ...passContext({ root, exec: processRunner(process.env), now: () => new Date(), faults: noFaults, load }, 'mesh-host'), systemd };
      const { observed } = await observe(resources, ctx);
      return applyPlan(plan(resources, store.data.owned, observed, (r, o) => handlerFor(r).diff(r, o)), observed, store, ctx);
    };
  }
  /** A pass's lines as "id result (changes)". */
  const said = (lines: ResourceResult[]) => lines.map((l) => `${l.id} ${l.result}${l.changes ? ` (${l.changes.join('; ')})` : ''}`);

  it('is enabled offline with systemctl --root, read back, and unchanged next pass', async () => {
    // Where a package installs its units on every Debian release (merged /usr: Debian 13's systemd does not look in ROOT/lib).
    const root = withUnit(machine(), 'usr/lib/systemd/system');
    const { body } = await apply(root, service());
    expect(body.resources).toEqual([{ id: 'service:demo', result: 'updated', changes: ['disabled → enabled'] }]);
    expect(readlinkSync(wants(root))).toBe('/usr/lib/systemd/system/demo.service');
    expect((await apply(root, service())).body.resources).toEqual([{ id: 'service:demo', result: 'unchanged' }]);
  });

  it('disabled by hand, is enabled again on the next pass with drift: true', async () => {
    const root = withUnit(machine());
    await apply(root, service());
    unlinkSync(wants(root));
    expect((await apply(root, service())).body.resources).toEqual([{ id: 'service:demo', result: 'updated', changes: ['disabled → enabled'], drift: true }]);
    expect(enabledLink(root)).toBe(true);
  });

  it('declaring running without a running systemd gives an unverified line and an unverified pass (not applied, not failed); the check is not a change', async () => {
    const root = withUnit(machine());
    const { code, body } = await apply(root, service('    running: true\n'));
    expect(code).toBe(0);
    expect(body.outcome).toBe('unverified');
    expect(body.resources).toEqual([{ id: 'service:demo', result: 'unverified', changes: ['disabled → enabled'], error: 'no running systemd under this root: running=true not verified' }]);
    expect(body.counts).toMatchObject({ changed: 1, failed: 0 });
    expect(enabledLink(root)).toBe(true);
    const again = (await apply(root, service('    running: true\n'))).body;
    expect(again.outcome).toBe('unverified');
    expect(again.resources).toEqual([{ id: 'service:demo', result: 'unverified', error: 'no running systemd under this root: running=true not verified' }]);
    expect(again.counts).toMatchObject({ changed: 0, unchanged: 0, failed: 0 });
  });

  it('a change to a file in restartOn requests a restart; an unchanged pass does not', async () => {
    const root = withUnit(machine());
    const decl = (text: string) => `  - type: file\n    path: /etc/demo.conf\n    content: "${text}\\n"\n` + service('    restartOn: [/etc/demo.conf]\n');
    await apply(root, decl('a'));
    expect((await apply(root, decl('a'))).body.resources.map((l) => l.result)).toEqual(['unchanged', 'unchanged']);
    const { code, body } = await apply(root, decl('b'));
    expect(code).toBe(0);
    expect(body.resources).toEqual([
      { id: 'file:/etc/demo.conf', result: 'updated', changes: ['content differs'] },
      { id: 'service:demo', result: 'unverified', changes: ['restart requested: /etc/demo.conf changed'], error: 'restart requested but no running systemd' },
    ]);
  });

  /** A running systemd simulated in-process (none runs in this container): what it was asked to do, and whether the unit is active. */
  function simulated(active: boolean) {
    const sim = { calls: [] as string[], active };
    const systemd: ServiceManager = {
      isActive: async () => sim.active,
      control: async (verb, unit) => void (sim.calls.push(`${verb} ${unit}`), (sim.active = verb !== 'stop')),
    };
    return { sim, systemd };
  }

  it('with a running systemd (simulated in-process: none runs in this container) a watched change restarts the service, unless the pass started it (with the new file)', async () => {
    const root = withUnit(machine());
    const { sim, systemd } = simulated(false);
    const calls = sim.calls;
    const run = inProcess(root, systemd);
    const pass = async (content: string) => {
      const resources: Resource[] = [
        { type: 'file', path: '/etc/demo.conf', content },
        { type: 'service', name: 'demo', enabled: true, running: true, restartOn: ['/etc/demo.conf'] },
      ];
      return run(resources);
    };
    expect(said(await pass('a\n'))).toEqual(['file:/etc/demo.conf created (absent, should be a file)', 'service:demo updated (disabled → enabled; stopped → running)']);
    expect(calls).toEqual(['start demo']);
    expect(await pass('a\n')).toEqual([{ id: 'file:/etc/demo.conf', result: 'unchanged' }, { id: 'service:demo', result: 'unchanged' }]);
    expect(await pass('b\n')).toEqual([
      { id: 'file:/etc/demo.conf', result: 'updated', changes: ['content differs'] },
      { id: 'service:demo', result: 'updated', changes: ['restarted: /etc/demo.conf changed'] },
    ]);
    expect(calls).toEqual(['start demo', 'restart demo']);
    // Stopped by hand, then its file changed: started with the new file, not restarted as well.
    sim.active = false;
    expect(said(await pass('c\n'))).toEqual(['file:/etc/demo.conf updated (content differs)', 'service:demo updated (stopped → running)']);
    expect(calls).toEqual(['start demo', 'restart demo', 'start demo']);
  });

  it('a change to a file in reloadOn reloads a running service (systemctl reload), not a stopped one; one in restartOn too restarts it instead', async () => {
    const root = withUnit(machine());
    const { sim, systemd } = simulated(true);
    const calls = sim.calls;
    const run = inProcess(root, systemd);
    const pass = (site: string, main: string, running = true) =>
      run([
        { type: 'file', path: '/etc/demo.conf', content: main },
        { type: 'file', path: '/etc/demo-site.conf', content: site },
        { type: 'service', name: 'demo', enabled: true, running, restartOn: ['/etc/demo.conf'], reloadOn: ['/etc/demo-site.conf'] },
      ]);
    await pass('a\n', 'a\n');
    calls.length = 0;
    expect(said(await pass('b\n', 'a\n'))).toEqual(['file:/etc/demo.conf unchanged', 'file:/etc/demo-site.conf updated (content differs)', 'service:demo updated (reloaded: /etc/demo-site.conf changed)']);
    expect(said(await pass('c\n', 'b\n'))).toEqual(['file:/etc/demo.conf updated (content differs)', 'file:/etc/demo-site.conf updated (content differs)', 'service:demo updated (restarted: /etc/demo.conf changed)']);
    expect(calls).toEqual(['reload demo', 'restart demo']);
    // Stopped (and declared so): nothing to reload; it reads the new file when it starts.
    expect(said(await pass('d\n', 'b\n', false))).toEqual(['file:/etc/demo.conf unchanged', 'file:/etc/demo-site.conf updated (content differs)', 'service:demo updated (running → stopped)']);
    expect(calls).toEqual(['reload demo', 'restart demo', 'stop demo']);
  });

  it('--noop says a watched change would restart or reload a running service, and nothing more of one the pass would start', () => {
    const r: Resource = { type: 'service', name: 'demo', running: true, restartOn: ['/etc/a.conf'], reloadOn: ['/etc/b.conf'] };
    const systemd: ServiceManager = { isActive: async () => true, control: async () => undefined };
    const ctx = { systemd } as unknown as Parameters<NonNullable<ReturnType<typeof handlerFor>['wouldRefresh']>>[2];
    const would = (changed: string[], running: boolean) => handlerFor(r).wouldRefresh!(r, changed, ctx, { enabled: 'enabled', running });
    expect(would(['/etc/a.conf', '/etc/b.conf'], true)).toBe('a pass would restart it');
    expect(would(['/etc/b.conf'], true)).toBe('a pass would reload it (when it runs)');
    expect(would(['/etc/a.conf'], false)).toBeNull();
  });

  it('needs its unit file when the fleet declares it: written first wherever declared; a changed one is read again (daemon-reload), and restarts it only through restartOn', async () => {
    const root = machine();
    mkdirSync(join(root, 'etc/systemd/system'), { recursive: true });
    const unitPath = '/etc/systemd/system/demo.service';
    const calls: string[] = [];
    let active = false;
    let loaded: string | null = null;
    const dropInPath = `${unitPath}.d/env.conf`;
    const onDisk = () => readFileSync(join(root, unitPath), 'utf8') + (existsSync(join(root, dropInPath)) ? readFileSync(join(root, dropInPath), 'utf8') : '');
    // A systemd that reads the unit when it starts it, and sees it stale once it changed on disk.
    const systemd: ServiceManager = {
      isActive: async () => active,
      control: async (verb, unit) => void (calls.push(`${verb} ${unit}`), (active = verb !== 'stop'), (loaded = onDisk())),
      reloadIfStale: async () => {
        if (loaded === null || loaded === onDisk()) return false;
        calls.push('daemon-reload');
        loaded = onDisk();
        return true;
      },
    };
    const run = inProcess(root, systemd);
    const pass = async (unit: string, restartOn?: string[]) => {
      // The service declared before its unit file.
      const resources: Resource[] = [
        { type: 'service', name: 'demo', enabled: true, running: true, ...(restartOn ? { restartOn } : {}) },
        { type: 'file', path: unitPath, content: `[Service]\nExecStart=/bin/${unit}\n[Install]\nWantedBy=multi-user.target\n` },
      ];
      return said(await run(resources));
    };
    expect(await pass('true')).toEqual([`file:${unitPath} created (absent, should be a file)`, 'service:demo updated (not-found → enabled; stopped → running)']);
    expect(calls).toEqual(['start demo']);
    expect(await pass('sleep')).toEqual([`file:${unitPath} updated (content differs)`, `service:demo updated (unit files read again (daemon-reload): ${unitPath} changed)`]);
    expect(calls).toEqual(['start demo', 'daemon-reload']);
    expect(await pass('echo', [unitPath])).toEqual([`file:${unitPath} updated (content differs)`, `service:demo updated (restarted: ${unitPath} changed)`]);
    expect(calls).toEqual(['start demo', 'daemon-reload', 'restart demo']);
    expect(await pass('echo', [unitPath])).toEqual([`file:${unitPath} unchanged`, 'service:demo unchanged']);
    // A drop-in, declared after the service, goes first too, and its change is read again the same way.
    const withDropIn = async (env: string) => {
      const resources: Resource[] = [
        { type: 'service', name: 'demo', enabled: true, running: true, restartOn: [unitPath] },
        { type: 'file', path: dropInPath, content: `[Service]\nEnvironment=${env}\n` },
        { type: 'directory', path: `${unitPath}.d` },
        { type: 'file', path: unitPath, content: '[Service]\nExecStart=/bin/echo\n[Install]\nWantedBy=multi-user.target\n' },
      ];
      return said(await run(resources));
    };
    expect(await withDropIn('A=1')).toEqual([`file:${unitPath} unchanged`, `directory:${unitPath}.d created (absent, should be a directory)`, `file:${dropInPath} created (absent, should be a file)`, `service:demo updated (unit files read again (daemon-reload): ${dropInPath} changed)`]);
    expect(await withDropIn('A=2')).toEqual([`file:${unitPath} unchanged`, `directory:${unitPath}.d unchanged`, `file:${dropInPath} updated (content differs)`, `service:demo updated (unit files read again (daemon-reload): ${dropInPath} changed)`]);
    expect(calls).toEqual(['start demo', 'daemon-reload', 'restart demo', 'daemon-reload', 'daemon-reload']);
  });

  it('whose declared unit file failed is not enabled or started: skipped, naming the file', async () => {
    const root = machine(); // no etc/systemd/system: the unit file cannot be written
    const decl = service('    running: true\n') + '  - type: file\n    path: /etc/systemd/system/demo.service\n    content: "[Service]\\nExecStart=/bin/true\\n"\n';
    const { code, body } = await apply(root, decl);
    expect(code).toBe(1);
    expect(body.resources.map((l) => `${l.id} ${l.result}`)).toEqual(['file:/etc/systemd/system/demo.service failed', 'service:demo skipped']);
    expect(lineOf(body, 'service:demo')!.error).toBe('not applied, because what it needs did not apply in this pass: file:/etc/systemd/system/demo.service failed; the next pass tries again');
  });

  it('un-declared, is put back to disabled as it was before', async () => {
    const root = withUnit(machine());
    await apply(root, service());
    const { body } = await apply(root, NOTHING);
    expect(body.resources).toEqual([{ id: 'service:demo', result: 'restored', changes: ['put demo back to disabled'] }]);
    expect(enabledLink(root)).toBe(false);
  });
});

describe('bad input applies nothing', () => {
  const file = (path: string, extra = '') => `  - type: file\n    path: ${path}\n    content: "x\\n"\n${extra}`;
  const throughLink = '  - type: directory\n    path: /srv/app\n  - type: symlink\n    path: /etc/app\n    target: ../srv/app\n' + file('/srv/app/conf') + file('/etc/app/conf') + file('/etc/app/other');

  async function refused(resources: string): Promise<Body> {
    const root = machine();
    const before = snapshot(root);
    const { code, body } = await apply(root, resources);
    expect(code).toBe(1);
    expect(body.outcome).toBe('failed');
    expect(snapshot(root)).toEqual(before);
    return body;
  }

  it('an owner or group that no user or group resource declares fails the whole pass before any change', async () => {
    const body = await refused('  - type: group\n    name: web\n' + file('/etc/a', '    owner: nobody9\n    group: nogroup9\n') + '  - type: user\n    name: bob\n    groups: [ghosts]\n');
    expect(body.resources).toEqual([
      { id: 'group:web', result: 'skipped', error: 'nothing applied: pre-flight found 3 problem(s) in this declaration' },
      { id: 'file:/etc/a', result: 'failed', error: "owner 'nobody9' is neither a user on this machine nor declared as a user resource; group 'nogroup9' is neither a group on this machine nor declared as a group resource" },
      { id: 'user:bob', result: 'failed', error: "groups 'ghosts' is neither a group on this machine nor declared as a group resource" },
    ]);
  });

  it('an owner that this pass would delete (un-declared, created by mesh) fails the pass and keeps the user', async () => {
    const root = machine();
    await apply(root, '  - type: user\n    name: bob\n' + file('/etc/a', '    owner: bob\n'));
    const { code, body } = await apply(root, file('/etc/a', '    owner: bob\n'));
    expect(code).toBe(1);
    expect(body.resources).toEqual([
      { id: 'file:/etc/a', result: 'failed', error: "owner 'bob' will not exist after this pass: user:bob is no longer declared and is removed in this pass" },
      { id: 'user:bob', result: 'skipped', error: 'nothing applied: pre-flight found 1 problem(s) in this declaration' },
    ]);
    expect(etcLine(root, 'passwd', 'bob')).toMatch(/^bob:x:2000:2000:/);
  });

  it.each([
    ['the same identity twice, differently', file('/etc/a') + '  - type: user\n    name: bob\n' + '  - type: user\n    name: bob\n    uid: 1500\n', "base.yaml:7:5: user:bob is declared again here and differently at BUNDLE/base.yaml:5:5; declare it once, and vary it with variables"],
    ['two resources that land on one file through a declared symlink', throughLink, 'base.yaml:11:11: /etc/app/conf collides with file:/srv/app/conf (at BUNDLE/base.yaml:7:5) through symlink:/etc/app (both are /srv/app/conf)'],
    ['a file through a declared symlink', throughLink, 'base.yaml:14:11: /etc/app/other goes through symlink:/etc/app; mesh never writes through a symlink: declare it as /srv/app/other'],
    ['one path declared as two types', file('/etc/a') + '  - type: symlink\n    path: /etc/a\n    target: /etc/b\n', 'base.yaml:6:11: /etc/a is declared here as a symlink and as a file at BUNDLE/base.yaml:2:5; one path can hold one thing: keep one of them'],
    ['a relative path', file('etc/a'), 'base.yaml:3:11: resources.0.path: must be an absolute path (start with /)'],
    ['a .. path', '  - type: symlink\n    path: /etc/../a\n    target: /b\n', "base.yaml:3:11: resources.0.path: must not contain '..'"],
    ['a restartOn path with ..', '  - type: service\n    name: x\n    restartOn: [/etc/../x]\n', "base.yaml:4:17: resources.0.restartOn.0: must not contain '..'"],
  ])('%s is rejected when the declaration is loaded', async (_name, resources, message) => {
    const body = await refused(resources);
    expect(body.resources).toEqual([]);
    // Each problem names the file as it is in the bundle folder, not the fleet path it stands for (nodes/<node>/).
    for (const e of body.errors) expect(e.file).toMatch(/-bundle\/base\.yaml$/);
    const place = (e: Body['errors'][number]) => `${e.file!.split('/').pop()}:${e.line}:${e.col}: ${e.message.replaceAll(e.file!.slice(0, e.file!.lastIndexOf('/')), 'BUNDLE')}`;
    expect(body.errors.map(place)).toContain(message);
  });
});
