/**
 * The `package` resource, end to end: the built mesh-host installs, upgrades, downgrades and
 * removes real .deb files from a real local apt repository into a --root through the real
 * apt-get and dpkg, and the machine running the test is left untouched.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAptRepo, buildDeb, loggingShims, prepareDpkgRoot, sourceLine } from './helpers/apt-repo.js';
import { MESH_HOST, newMachine, runProgram } from './helpers/fleet.js';

const HELLO = 'mesh-test-hello';
const GREETING = `usr/share/${HELLO}/greeting`;
const pkg = (fields: string) => `  - type: package\n    name: ${HELLO}\n${fields}`;
/** A package with a configuration file, which dpkg keeps when it is removed and deletes when it is purged. */
const CONF = 'mesh-test-conf';
const CONF_FILE = `etc/${CONF}/${CONF}.conf`;
const conf = (fields: string) => `  - type: package\n    name: ${CONF}\n${fields}`;

let work: string;
let repo: string;
let shims: string;
let seq = 0;
const hostBefore = hostFingerprint();

/** What the machine running the test has that a leak out of a root would change. */
function hostFingerprint() {
  const status = '/var/lib/dpkg/status';
  const mentions = (f: string) => (existsSync(f) ? readFileSync(f, 'utf8').split('mesh-test-').length - 1 : 0);
  return {
    status: createHash('sha256').update(readFileSync(status)).digest('hex'),
    statusMtime: statSync(status).mtimeMs,
    dpkgLog: mentions('/var/log/dpkg.log'),
    aptHistory: mentions('/var/log/apt/history.log'),
  };
}

/** A bundle folder holding `resources` (YAML list items) as its one declaration file. */
function bundleOf(resources: string): string {
  const bundle = join(work, `bundle-${++seq}`);
  mkdirSync(bundle);
  writeFileSync(join(bundle, 'base.yaml'), resources.trim() ? `resources:\n${resources}` : 'resources: []\n');
  return bundle;
}

/** Apply `resources` (YAML list items) to `root` with the built host; returns its JSON body and the commands it ran. */
async function apply(root: string, resources: string) {
  const bundle = bundleOf(resources);
  const log = join(work, `exec-${seq}.log`);
  writeFileSync(log, '');
  const env = { PATH: `${shims}:${process.env.PATH}`, MESH_TEST_EXEC_LOG: log };
  const run = await runProgram('node', [MESH_HOST, 'apply', '--bundle', bundle, '--root', root, '--json'], root, env);
  if (!run.stdout.startsWith('{')) throw new Error(`mesh-host apply printed no JSON (exit ${run.code}):\n${run.stderr}`);
  const body = JSON.parse(run.stdout) as { outcome: string; resources: { id: string; result: string; changes?: string[]; error?: string }[] };
  return { code: run.code, body, ran: readFileSync(log, 'utf8').split('\n').filter(Boolean), stderr: run.stderr };
}

/** What the root's own dpkg says about the test package, or null. */
function dpkgSays(root: string, name = HELLO): string | null {
  try {
    return execFileSync('dpkg-query', [`--admindir=${root}/var/lib/dpkg`, '-W', '-f', '${Status} ${Version}', name], { stdio: 'pipe' }).toString();
  } catch {
    return null;
  }
}

/** A simulated machine with a dpkg database and the test repository as its apt source. */
const machine = (name: string) => prepareDpkgRoot(newMachine(join(work, name)), repo);

async function installed(name: string, version: string): Promise<string> {
  const root = machine(name);
  expect((await apply(root, pkg(`    version: "${version}"\n`))).code).toBe(0);
  return root;
}

describe('the package resource', () => {
  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), 'mesh-pkg-'));
    const debs = join(work, 'debs');
    mkdirSync(debs);
    repo = buildAptRepo(join(work, 'repo'), [
      buildDeb(debs, { name: HELLO, version: '1.0-1', files: { [`/${GREETING}`]: 'hello 1\n' } }),
      buildDeb(debs, { name: HELLO, version: '2.0-1', files: { [`/${GREETING}`]: 'hello 2\n' }, depends: 'mesh-test-lib' }),
      buildDeb(debs, { name: 'mesh-test-lib', version: '1.0-1', files: { '/usr/share/mesh-test-lib/lib': 'lib\n' } }),
      buildDeb(debs, { name: 'mesh-test-broken', version: '1.0-1', depends: 'mesh-test-nowhere (>= 2)' }),
      buildDeb(debs, { name: CONF, version: '1.0-1', files: { [`/${CONF_FILE}`]: 'setting = 1\n' }, conffiles: [`/${CONF_FILE}`] }),
    ]);
    shims = loggingShims(join(work, 'shims'), ['apt-get', 'dpkg-query']);
  });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('installs a package into the root from the local apt repository, with its source declared in the same pass, and reads it back', async () => {
    const root = prepareDpkgRoot(newMachine(join(work, 'install')));
    const source = `  - type: file\n    path: /etc/apt/sources.list.d/fleet.list\n    content: ${JSON.stringify(sourceLine(repo))}\n`;
    const run = await apply(root, source + pkg('    version: "1.0-1"\n'));
    expect(run.code, run.stderr).toBe(0);
    expect(run.body.resources[1]).toEqual({ id: `package:${HELLO}`, result: 'created', changes: ['not installed, should be 1.0-1'] });
    expect(run.ran).toEqual([`dpkg-query ${HELLO}`, 'apt-get update', `apt-get install ${HELLO}=1.0-1`, `dpkg-query ${HELLO}`]);
    expect(readFileSync(join(root, GREETING), 'utf8')).toBe('hello 1\n');
    expect(dpkgSays(root)).toBe('install ok installed 1.0-1');
  });

  it('comes after apt\'s configuration wherever that is declared, and is not tried when a file of it failed', async () => {
    const root = prepareDpkgRoot(newMachine(join(work, 'after-source')));
    const source = `  - type: file\n    path: /etc/apt/sources.list.d/fleet.list\n    content: ${JSON.stringify(sourceLine(repo))}\n`;
    // No /etc/apt/keyrings on this machine: the key file fails, and the package that would read it is skipped.
    const key = '  - type: file\n    path: /etc/apt/keyrings/fleet.asc\n    content: "key\\n"\n';
    const failed = await apply(root, pkg('    version: "1.0-1"\n') + source + key);
    expect(failed.code).toBe(1);
    expect(failed.body.resources.map((l) => `${l.id} ${l.result}`)).toEqual(['file:/etc/apt/sources.list.d/fleet.list created', 'file:/etc/apt/keyrings/fleet.asc failed', `package:${HELLO} skipped`]);
    expect(failed.body.resources[2]!.error).toContain('file:/etc/apt/keyrings/fleet.asc failed');
    expect(failed.ran).toEqual([`dpkg-query ${HELLO}`]);
    const run = await apply(root, pkg('    version: "1.0-1"\n') + source);
    expect(run.code, run.stderr).toBe(0);
    expect(run.body.resources.map((l) => `${l.id} ${l.result}`)).toEqual(['file:/etc/apt/sources.list.d/fleet.list unchanged', `package:${HELLO} created`, 'file:/etc/apt/keyrings/fleet.asc dropped']);
    expect(dpkgSays(root)).toBe('install ok installed 1.0-1');
  });

  it('a second pass over the same declaration changes nothing and runs no apt-get', async () => {
    const root = await installed('noop', '1.0-1');
    const lists = statSync(join(root, 'var/lib/apt/lists')).mtimeMs;
    const run = await apply(root, pkg('    version: "1.0-1"\n'));
    expect(run.code).toBe(0);
    expect(run.body.resources).toEqual([{ id: `package:${HELLO}`, result: 'unchanged' }]);
    expect(run.ran).toEqual([`dpkg-query ${HELLO}`]);
    expect(statSync(join(root, 'var/lib/apt/lists')).mtimeMs).toBe(lists);
  });

  it('upgrades to a pinned version, with its dependency, and downgrades to a pinned version', async () => {
    const root = await installed('pin', '1.0-1');
    const up = await apply(root, pkg('    version: "2.0-1"\n'));
    expect(up.body.resources).toEqual([{ id: `package:${HELLO}`, result: 'updated', changes: ['version 1.0-1 → 2.0-1'] }]);
    expect(up.ran).toEqual([`dpkg-query ${HELLO}`, `apt-get install ${HELLO}=2.0-1`, `dpkg-query ${HELLO}`]);
    expect(readFileSync(join(root, GREETING), 'utf8')).toBe('hello 2\n');
    expect(dpkgSays(root, 'mesh-test-lib')).toBe('install ok installed 1.0-1');
    const down = await apply(root, pkg('    version: "1.0-1"\n'));
    expect(down.body.resources).toEqual([{ id: `package:${HELLO}`, result: 'updated', changes: ['version 2.0-1 → 1.0-1'] }]);
    expect(readFileSync(join(root, GREETING), 'utf8')).toBe('hello 1\n');
    expect(dpkgSays(root)).toBe('install ok installed 1.0-1');
  });

  it('ensure: absent removes it', async () => {
    const root = await installed('absent', '1.0-1');
    const run = await apply(root, pkg('    ensure: absent\n'));
    expect(run.body.resources).toEqual([{ id: `package:${HELLO}`, result: 'updated', changes: ['installed at 1.0-1, should be absent'] }]);
    expect(dpkgSays(root)).toBeNull();
    expect(existsSync(join(root, GREETING))).toBe(false);
    expect((await apply(root, pkg('    ensure: absent\n'))).ran).toEqual([`dpkg-query ${HELLO}`]);
  });

  it('ensure: absent with purge: true removes it with its configuration files, and says so', async () => {
    const root = machine('purge');
    expect((await apply(root, conf(''))).code).toBe(0);
    expect(readFileSync(join(root, CONF_FILE), 'utf8')).toBe('setting = 1\n');
    const run = await apply(root, conf('    ensure: absent\n    purge: true\n'));
    expect(run.code, run.stderr).toBe(0);
    expect(run.body.resources).toEqual([{ id: `package:${CONF}`, result: 'updated', changes: ['installed at 1.0-1, should be purged'] }]);
    expect(run.ran).toEqual([`dpkg-query ${CONF}`, `apt-get -s purge ${CONF}`, `apt-get purge ${CONF}`, `dpkg-query ${CONF}`]);
    expect(dpkgSays(root, CONF)).toBeNull();
    expect(existsSync(join(root, CONF_FILE))).toBe(false);
    expect((await apply(root, conf('    ensure: absent\n    purge: true\n'))).ran).toEqual([`dpkg-query ${CONF}`]);
  });

  it('purge: true finishes what an earlier removal left: the configuration files dpkg kept', async () => {
    const root = machine('purge-later');
    expect((await apply(root, conf(''))).code).toBe(0);
    writeFileSync(join(root, CONF_FILE), 'setting = 2\n');
    const removed = await apply(root, conf('    ensure: absent\n'));
    expect(removed.body.resources).toEqual([{ id: `package:${CONF}`, result: 'updated', changes: ['installed at 1.0-1, should be absent'] }]);
    // Removed, as apt-get remove leaves it: a second pass without purge has nothing to do.
    expect(dpkgSays(root, CONF)).toBe('deinstall ok config-files 1.0-1');
    expect(readFileSync(join(root, CONF_FILE), 'utf8')).toBe('setting = 2\n');
    expect((await apply(root, conf('    ensure: absent\n'))).body.resources).toEqual([{ id: `package:${CONF}`, result: 'unchanged' }]);
    const run = await apply(root, conf('    ensure: absent\n    purge: true\n'));
    expect(run.code, run.stderr).toBe(0);
    expect(run.body.resources).toEqual([{ id: `package:${CONF}`, result: 'updated', changes: ['removed, its configuration files (of 1.0-1) remain, should be purged'] }]);
    expect(dpkgSays(root, CONF)).toBeNull();
    expect(existsSync(join(root, CONF_FILE))).toBe(false);
    // Un-declared, nothing is put back: configuration files alone were no package.
    const undeclared = await apply(root, '');
    expect(undeclared.code, undeclared.stderr).toBe(0);
    expect(dpkgSays(root, CONF)).toBeNull();
  });

  it('purge without ensure: absent is refused before anything runs', async () => {
    const root = await installed('purge-present', '1.0-1');
    const run = await runProgram('node', [MESH_HOST, 'apply', '--bundle', bundleOf(pkg('    purge: true\n')), '--root', root], root, {});
    expect(run.code).toBe(1);
    expect(run.stdout + run.stderr).toContain('base.yaml:4:12: resources.0.purge: purge removes a package with its configuration files: write ensure: absent with it, or drop purge');
    expect(dpkgSays(root)).toBe('install ok installed 1.0-1');
  });

  it('un-declaring a package the host installed removes it', async () => {
    const root = await installed('undeclare', '1.0-1');
    const run = await apply(root, '');
    expect(run.body.resources).toEqual([{ id: `package:${HELLO}`, result: 'removed' }]);
    expect(run.ran).toEqual([`dpkg-query ${HELLO}`, `apt-get -s remove ${HELLO}`, `apt-get remove ${HELLO}`]);
    expect(dpkgSays(root)).toBeNull();
  });

  it('un-declaring a package installed before the host took it over puts its earlier version back and leaves it installed', async () => {
    const root = machine('before');
    execFileSync('dpkg', [`--root=${root}`, `--log=${root}/var/log/dpkg.log`, '-i', join(repo, `${HELLO}_1.0-1_all.deb`)], { stdio: 'pipe' });
    expect((await apply(root, pkg('    version: "2.0-1"\n'))).body.resources).toMatchObject([{ result: 'updated' }]);
    const run = await apply(root, '');
    expect(run.body.resources).toEqual([{ id: `package:${HELLO}`, result: 'restored', changes: [`restored ${HELLO} to 1.0-1, the version installed before mesh took it over`] }]);
    expect(dpkgSays(root)).toBe('install ok installed 1.0-1');
  });

  it('un-declaring a package whose earlier version is gone from the repository leaves it installed and says so', async () => {
    const root = machine('gone');
    execFileSync('dpkg', [`--root=${root}`, `--log=${root}/var/log/dpkg.log`, '-i', buildDeb(work, { name: HELLO, version: '0.9-1' })], { stdio: 'pipe' });
    await apply(root, pkg('    version: "2.0-1"\n'));
    const run = await apply(root, '');
    const note = `left ${HELLO} at 2.0-1: version 0.9-1, installed before mesh took it over, is no longer in the package repository`;
    expect(run.body.resources).toEqual([{ id: `package:${HELLO}`, result: 'restored', changes: [note] }]);
    expect(dpkgSays(root)).toBe('install ok installed 2.0-1');
  });

  it('un-declaring a package that a declared package depends on is refused, naming the dependent, and removes nothing', async () => {
    const root = machine('needed');
    const lib = '  - type: package\n    name: mesh-test-lib\n';
    expect((await apply(root, lib + pkg('    version: "2.0-1"\n'))).code).toBe(0);
    const run = await apply(root, pkg('    version: "2.0-1"\n'));
    expect(run.code).toBe(1);
    expect(run.body.resources[1]).toEqual({ id: 'package:mesh-test-lib', result: 'failed', error: `removing mesh-test-lib would also remove what depends on it (${HELLO}): mesh removes only what it was asked to; remove or un-declare those first, or keep mesh-test-lib declared` });
    expect([dpkgSays(root), dpkgSays(root, 'mesh-test-lib')]).toEqual(['install ok installed 2.0-1', 'install ok installed 1.0-1']);
  });

  it('a version that does not exist fails with a clear error and leaves the root\'s package state unchanged', async () => {
    const root = await installed('missing', '1.0-1');
    const status = readFileSync(join(root, 'var/lib/dpkg/status'));
    const run = await apply(root, pkg('    version: "9.9-1"\n'));
    expect(run.code).toBe(1);
    expect(run.body.resources).toEqual([{ id: `package:${HELLO}`, result: 'failed', changes: ['version 1.0-1 → 9.9-1'], error: [
      `apt-get install ${HELLO}=9.9-1 failed (exit 100):`,
      `  E: Version '9.9-1' for '${HELLO}' was not found`,
      `the package sources of this machine do not offer version 9.9-1 of ${HELLO}: publish it to the fleet's package repository, or declare a version it has`,
    ].join('\n') }]);
    // The lists were fresh, so apt-get update ran once, only after apt did not know the version.
    expect(run.ran).toEqual([`dpkg-query ${HELLO}`, `apt-get install ${HELLO}=9.9-1`, 'apt-get update', `apt-get install ${HELLO}=9.9-1`]);
    expect(readFileSync(join(root, 'var/lib/dpkg/status'))).toEqual(status);
    expect(dpkgSays(root)).toBe('install ok installed 1.0-1');
  });

  it('a package whose dependency cannot be installed fails with apt\'s reason in a few lines', async () => {
    const root = machine('unmet');
    const run = await apply(root, '  - type: package\n    name: mesh-test-broken\n');
    // What apt means, not one release's wording (apt 2.6 and 3.0 frame it differently): the command, the dependency that cannot be met, what to do, in a few lines.
    const lines = (run.body.resources[0]?.error ?? '').split('\n');
    expect(lines[0]).toBe('apt-get install mesh-test-broken failed (exit 100):');
    expect(lines).toContain('   mesh-test-broken : Depends: mesh-test-nowhere (>= 2) but it is not installable');
    expect(lines.at(-1)).toBe('fix the cause above (the package or the machine); the next pass tries again');
    expect(lines.length).toBeLessThanOrEqual(10);
    expect(readFileSync(join(root, 'var/lib/dpkg/status'), 'utf8')).toBe('');
  });

  it('a root with no dpkg database fails clearly and gets none', async () => {
    const root = newMachine(join(work, 'bare'));
    const run = await apply(root, pkg('    version: "1.0-1"\n'));
    expect(run.code).toBe(1);
    expect(run.body.resources[0]?.error).toMatch(new RegExp(`^cannot read current state: no package manager under ${root}: ${root}/var/lib/dpkg/status does not exist`));
    expect(run.ran).toEqual([]);
    expect(existsSync(join(root, 'var/lib/dpkg'))).toBe(false);
  });

  it('the machine running the test is untouched', () => {
    expect(hostFingerprint()).toEqual(hostBefore);
    for (const path of [`/usr/share/${HELLO}`, '/usr/share/mesh-test-lib']) expect(existsSync(path)).toBe(false);
    expect(dpkgSays('/')).toBeNull();
    expect(execFileSync('ls', ['/var/cache/apt/archives']).toString()).not.toContain('mesh-test-');
  });
});
