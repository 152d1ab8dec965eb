/**
 * The host on a real Debian 12 machine: systemd as PID 1 (container.ts), the real mesh-host .deb
 * from `npm run package:deb`, and a real `mesh-cli serve` on this machine's 127.0.0.1. What
 * test/upgrade.test.ts plays with a simulated supervisor happens here for real, and every
 * assertion reads the machine's own state (dpkg, systemctl) as well as the fleet's reports.
 *
 * With CI set a machine that cannot be built or booted fails the run; elsewhere the tests are
 * skipped with the reason ("SKIPPED system tests: …" in the run's summary).
 */
import { execFile } from 'node:child_process';
import { appendFileSync, copyFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, type TestContext } from 'vitest';
import { cli, createFleet, git, TOP, type TestFleet } from '../helpers/fleet.js';
import { servePackages, type PackageServer } from '../helpers/host-debs.js';
import { tempDirs } from '../helpers/tmp.js';
import { boot, missingTools, type Container } from './container.js';

const run = promisify(execFile);
const temp = tempDirs();
const NODE = 'web-1';
const V = { first: '0.1.0', good: '0.2.0' } as const;
/** Hotfixes released one after another: more upgrades than the unit's StartLimitBurst (5) within its StartLimitIntervalSec. */
const HOTFIXES = ['0.2.1', '0.2.2', '0.2.3', '0.2.4', '0.2.5'];
const HELLO = '[Unit]\nDescription=hello from the fleet\n[Service]\nExecStart=/bin/sleep infinity\n[Install]\nWantedBy=multi-user.target\n';

interface Line { id: string; result: string; changes?: string[]; error?: string }
interface Report { commit: string | null; hostVersion: string; outcome: string; resources: Line[] }

/**
 * The .deb with a line naming its version added to its unit files, as a release that changes them
 * would: what systemd runs must then be reloaded from disk (the package's postinst does it).
 * systemd notices a changed unit file by its time, which a .deb keeps to the second: each version
 * gets its own, or two versions built in the same second would look the same to it.
 */
async function withOwnUnits(deb: string, version: string, index: number): Promise<string> {
  const tree = `${deb}.tree`;
  await run('dpkg-deb', ['--raw-extract', deb, tree]);
  for (const unit of ['mesh-host.service', 'mesh-host-rollback.service']) {
    const file = join(tree, 'lib/systemd/system', unit);
    appendFileSync(file, `# mesh-host ${version}\n`);
    const at = new Date(Date.UTC(2026, 0, 1, index));
    utimesSync(file, at, at);
  }
  await run('dpkg-deb', ['--root-owner-group', '--build', tree, deb]);
  rmSync(tree, { recursive: true });
  return deb;
}

describe('a mesh host on a real Debian 12 machine with systemd as PID 1', () => {
  let skipped: string | undefined;
  let box: Container | undefined;
  let fleet: TestFleet;
  let packages: PackageServer;
  const debs: Record<string, string> = {};

  /** The machine, or the test is skipped (never under CI: there beforeAll has failed instead). */
  const machine = (ctx: TestContext): Container => {
    if (skipped || !box) ctx.skip(`SKIPPED system tests: ${skipped ?? 'no machine'}`);
    return box!;
  };
  /** Every report the node pushed, oldest first. */
  const reports = async (): Promise<Report[]> => {
    await git(fleet.checkout, 'fetch', '--quiet', 'origin', `+refs/heads/reports/${NODE}:refs/remotes/origin/reports/${NODE}`);
    const commits = (await git(fleet.checkout, 'rev-list', '--reverse', `origin/reports/${NODE}`)).split('\n');
    return Promise.all(commits.map(async (c) => JSON.parse(await git(fleet.checkout, 'show', `${c}:status.json`)) as Report));
  };
  const reportWhere = async (test: (r: Report) => boolean, what: string, ms = 90_000): Promise<Report> => {
    for (const until = Date.now() + ms; Date.now() < until; await new Promise((r) => setTimeout(r, 500))) {
      const found = (await reports().catch(() => [])).find(test);
      if (found) return found;
    }
    const journal = await box!.exec('journalctl', ['--no-pager', '-n', '60', '-u', 'mesh-host', '-u', 'mesh-host-rollback']);
    throw new Error(`no report ${what} within ${ms / 1000} s; the machine's journal says:\n${journal.stdout}`);
  };
  /** systemd's NeedDaemonReload for the package's units: 'yes' when a unit file changed on disk after systemd read it. */
  const needsReload = async () => {
    const units = ['mesh-host.service', 'mesh-host-rollback.service'];
    return Object.fromEntries(await Promise.all(units.map(async (u) => [u, (await box!.must('systemctl', 'show', '--property=NeedDaemonReload', '--value', u)).trim()])));
  };
  const hostLine = (r: Report) => r.resources.find((l) => l.id === 'package:mesh-host');
  const declare = (resources: string, message: string) => fleet.commit({ [`nodes/${NODE}/base.yaml`]: `resources:\n${resources}` }, message);
  const helloResources = '  - type: file\n    path: /etc/systemd/system/hello.service\n    content: ' + JSON.stringify(HELLO) + '\n  - type: service\n    name: hello\n    enabled: true\n    running: true\n';
  const hostPackage = (version: string) =>
    `  - type: file\n    path: /etc/apt/sources.list.d/mesh.list\n    content: ${JSON.stringify(`deb [trusted=yes] ${packages.url}packages/ ./\n`)}\n  - type: package\n    name: mesh-host\n    version: "${version}"\n`;

  beforeAll(async () => {
    const missing = await missingTools();
    if (missing) {
      if (process.env.CI) throw new Error(`the system tests cannot run here: ${missing}`);
      skipped = missing;
      return;
    }
    fleet = await createFleet();
    packages = await servePackages(join(fleet.dir, 'packages'));
    const versions = [...Object.values(V), ...HOTFIXES];
    // Two at a time: this machine has two cores.
    for (let i = 0; i < versions.length; i += 2) {
      await Promise.all(versions.slice(i, i + 2).map(async (version, j) => {
        const { stdout } = await run(process.execPath, [join(TOP, 'scripts/package-deb.mjs'), '--out', join(fleet.dir, 'debs')], { env: { ...process.env, MESH_BUILD_VERSION: version } });
        debs[version] = await withOwnUnits(stdout.trim().split('\n').pop()!, version, i + j);
      }));
    }
    for (const version of versions) {
      const added = await cli(fleet.dir, 'packages', 'add', debs[version]!, '--dir', packages.dir);
      expect(added.code, added.stderr).toBe(0);
    }
    try {
      box = await boot(temp('mesh-system-'), 'bookworm', (line) => console.log(line));
    } catch (e) {
      if (process.env.CI) throw e;
      skipped = `the Debian container did not boot: ${(e as Error).message.split('\n')[0]}`;
    }
  }, 20 * 60_000);
  afterAll(async () => {
    await box?.stop();
    await packages?.stop();
    await fleet?.close();
  }, 120_000);

  it('the .deb installs, the node enrols inside, and `systemctl enable --now mesh-host` runs it: a declared unit and service come up enabled and running, read back from the real systemd', async (ctx) => {
    const m = machine(ctx);
    // Only the fleet's package repository: nothing in these tests may wait on the internet.
    writeFileSync(join(m.root, 'etc/apt/sources.list'), '');
    copyFileSync(debs[V.first]!, join(m.root, 'root/mesh-host.deb'));
    await m.must('dpkg', '-i', '/root/mesh-host.deb');
    expect(await m.must('dpkg-query', '--show', '--showformat=${Status} ${Version}', 'mesh-host')).toBe(`install ok installed ${V.first}`);

    const token = join(fleet.dir, `${NODE}.token`);
    expect((await cli(fleet.checkout, 'token', 'issue', NODE, '--out', token)).code).toBe(0);
    await git(fleet.checkout, 'push', '--quiet');
    copyFileSync(token, join(m.root, 'root/node.token'));
    expect(await m.must('mesh-host', 'enrol', '--token-file', '/root/node.token')).toMatch(new RegExp(`^enrolled as ${NODE} `));
    writeFileSync(join(m.root, 'etc/mesh-host/environment'), 'MESH_HOST_OPTIONS="--interval 2s"\nMESH_HOST_PROBATION=2min\n');
    const commit = await declare(helloResources, `${NODE}: hello`);
    await m.must('systemctl', 'enable', '--now', 'mesh-host');

    const applied = await reportWhere((r) => r.commit === commit && r.outcome !== 'enrolled', `for ${commit.slice(0, 12)}`);
    expect(applied).toMatchObject({ hostVersion: V.first, outcome: 'applied' });
    expect(applied.resources).toEqual([
      { id: 'file:/etc/systemd/system/hello.service', result: 'created', changes: ['absent, should be a file'] },
      { id: 'service:hello', result: 'updated', changes: ['not-found → enabled', 'stopped → running'] },
    ]);
    expect((await m.exec('systemctl', ['is-active', 'hello'])).stdout).toBe('active\n');
    expect((await m.exec('systemctl', ['is-enabled', 'hello'])).stdout).toBe('enabled\n');
    expect((await m.exec('systemctl', ['is-active', 'mesh-host'])).stdout).toBe('active\n');

    const status = await cli(fleet.checkout, 'status', '--json');
    expect(status.code, status.stdout + status.stderr).toBe(0);
    const row = JSON.parse(status.stdout).nodes.find((r: { node: string }) => r.node === NODE);
    expect(row).toMatchObject({ outcome: 'applied', hostVersion: V.first });
    expect(row.unchecked ?? []).toEqual([]);
  });

  it('a declared good version from `serve --packages` is installed and self-tested, the old host exits, systemd starts the new one, which completes a pass and marks itself last good', async (ctx) => {
    const m = machine(ctx);
    const mainPid = async () => (await m.must('systemctl', 'show', '--property=MainPID', '--value', 'mesh-host')).trim();
    const before = await mainPid();
    const commit = await declare(helloResources + hostPackage(V.good), `${NODE}: mesh-host ${V.good}`);
    const handover = await reportWhere((r) => r.commit === commit && hostLine(r)?.result === 'updated', `with the upgrade to ${V.good}`);
    expect(handover).toMatchObject({ hostVersion: V.first, outcome: 'applied' });
    expect(hostLine(handover)).toEqual({
      id: 'package:mesh-host',
      result: 'updated',
      changes: [`version ${V.first} → ${V.good}`, `self-test of mesh-host ${V.good} passed: this host (${V.first}) exits after this pass's report and the supervisor starts ${V.good}`],
    });
    const fromNew = await reportWhere((r) => r.hostVersion === V.good, `from ${V.good}`);
    expect(fromNew).toMatchObject({ commit, outcome: 'applied', resources: expect.arrayContaining([{ id: 'package:mesh-host', result: 'unchanged' }]) });

    // The machine's own account: dpkg has the new version, systemd restarted the unit once (the old host exited 0), and the new host recorded itself as last good.
    expect(await m.must('dpkg-query', '--show', '--showformat=${Status} ${Version}', 'mesh-host')).toBe(`install ok installed ${V.good}`);
    expect((await m.exec('systemctl', ['is-active', 'mesh-host'])).stdout).toBe('active\n');
    expect(await mainPid()).not.toBe(before);
    expect((await m.must('systemctl', 'show', '--property=NRestarts', '--value', 'mesh-host')).trim()).toBe('1');
    const state = async () => JSON.parse(await m.must('cat', '/var/lib/mesh-host/upgrade.json'));
    for (const until = Date.now() + 30_000; (await state()).lastGood?.version !== V.good && Date.now() < until; ) await new Promise((r) => setTimeout(r, 500));
    expect(await state()).toMatchObject({ lastGood: { version: V.good } });
    expect(await m.must('ls', '/var/lib/mesh-host/last-good')).toContain('mesh-host.mjs');
    expect((await m.exec('systemctl', ['is-active', 'hello'])).stdout).toBe('active\n');

    const status = await cli(fleet.checkout, 'status', '--json');
    expect(JSON.parse(status.stdout).nodes.find((r: { node: string }) => r.node === NODE)).toMatchObject({ outcome: 'applied', hostVersion: V.good });
    // The package's postinst reloaded systemd: the unit files it installed are the ones in use.
    expect(await needsReload()).toEqual({ 'mesh-host.service': 'no', 'mesh-host-rollback.service': 'no' });
  });

  it('five good upgrades in a row (hotfixes) are not counted toward the start limit: no rollback, the last one runs and reports', async (ctx) => {
    const m = machine(ctx);
    for (const version of HOTFIXES) {
      const commit = await declare(helloResources + hostPackage(version), `${NODE}: mesh-host ${version}`);
      const report = await reportWhere((r) => r.hostVersion === version && r.commit === commit, `from ${version}`);
      expect(report.outcome, JSON.stringify(report.resources)).toBe('applied');
    }
    const last = HOTFIXES.at(-1)!;
    expect(await m.must('dpkg-query', '--show', '--showformat=${Status} ${Version}', 'mesh-host')).toBe(`install ok installed ${last}`);
    expect((await m.exec('systemctl', ['is-active', 'mesh-host'])).stdout).toBe('active\n');
    // The rollback unit never ran, and nothing was refused.
    expect((await m.must('systemctl', 'show', '--property=ExecMainStartTimestampMonotonic', '--value', 'mesh-host-rollback')).trim()).toBe('0');
    expect(JSON.parse(await m.must('cat', '/var/lib/mesh-host/upgrade.json'))).not.toHaveProperty('rejected');
    expect(await needsReload()).toEqual({ 'mesh-host.service': 'no', 'mesh-host-rollback.service': 'no' });
    const status = await cli(fleet.checkout, 'status', '--json');
    expect(JSON.parse(status.stdout).nodes.find((r: { node: string }) => r.node === NODE)).toMatchObject({ outcome: 'applied', hostVersion: last });
  }, 8 * 60_000);
});
