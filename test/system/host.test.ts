/**
 * The host on real Debian machines (12 bookworm and 13 trixie): systemd as PID 1 (container.ts),
 * the real mesh-host .deb from `npm run package:deb`, and a real `mesh-cli serve` on this
 * machine's 127.0.0.1. What test/upgrade.test.ts plays with a simulated supervisor happens here
 * for real, and every assertion reads the machine's own state (dpkg, systemctl, the journal) as
 * well as the fleet's reports and `mesh-cli status`.
 *
 * One machine per release, booted once, goes through the scenarios in order (each starts from
 * where the one before left it). Bookworm runs them all; trixie the representative subset
 * (enrol + service, a good upgrade, a crash-looping version rolled back): both together would
 * add minutes to every run for what the release does not change (apt, dpkg and systemd play the
 * same parts in the other scenarios). One machine at a time: the next boots after the last stops.
 *
 * With CI set a machine that cannot be built or booted fails the run; elsewhere the tests are
 * skipped with the reason ("SKIPPED system tests: …" in the run's summary).
 */
import { execFile } from 'node:child_process';
import { appendFileSync, copyFileSync, existsSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, type TestContext } from 'vitest';
import { cli, createFleet, git, startServer, TOP, type TestFleet } from '../helpers/fleet.js';
import { servePackages, type PackageServer } from '../helpers/host-debs.js';
import { tempDirs } from '../helpers/tmp.js';
import { boot, missingTools, type Container } from './container.js';
import type { Release } from './image.js';

const run = promisify(execFile);
const temp = tempDirs();
const V = { first: '0.1.0', good: '0.2.0' } as const;
/** Hotfixes released one after another: more upgrades than the unit's StartLimitBurst (5) within its StartLimitIntervalSec. */
const HOTFIXES = ['0.2.1', '0.2.2', '0.2.3', '0.2.4', '0.2.5'];
/** Versions that must not take over: one whose binary does not load, one that crashes on start, one whose first pass never ends. */
const BAD = { selfTest: '0.3.0', crash: '0.3.1', hang: '0.3.2' } as const;
/** A good version installed while the fleet server is down. */
const DURING_OUTAGE = '0.4.0';
/** A good version that starts while the host's state folder is read-only (a full or read-only /var). */
const DURING_READ_ONLY = '0.4.1';
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
    const file = join(tree, UNIT_DIR, unit);
    appendFileSync(file, `# mesh-host ${version}\n`);
    const at = new Date(Date.UTC(2026, 0, 1, index));
    utimesSync(file, at, at);
  }
  await run('dpkg-deb', ['--root-owner-group', '--build', tree, deb]);
  rmSync(tree, { recursive: true });
  return deb;
}

/** Where the package installs its units. */
const UNIT_DIR = 'usr/lib/systemd/system';

/** `scripts/package-deb.mjs` at `version`; with `spoil`, of a bundle built at that version and then changed by it (as test/helpers/host-debs.ts does). */
async function packageDeb(out: string, version: string, spoil?: (js: string) => string): Promise<string> {
  const env = { ...process.env, MESH_BUILD_VERSION: version };
  const args = [join(TOP, 'scripts/package-deb.mjs'), '--out', out];
  if (spoil) {
    const build = join(out, `build-${version}`);
    await run(process.execPath, [join(TOP, 'scripts/build.mjs')], { env: { ...env, MESH_BUILD_OUT: build } });
    const bundle = join(build, 'mesh-host.cjs');
    writeFileSync(bundle, spoil(readFileSync(bundle, 'utf8')));
    args.push('--bundle', bundle);
  }
  const { stdout } = await run(process.execPath, args, { env });
  return stdout.trim().split('\n').pop()!;
}

/** Half the bundle: it does not even load, so its self-test fails. */
const truncated = (js: string) => js.slice(0, Math.floor(js.length / 2));
/** Passes its self-test, but `mesh-host run` (what the unit starts) exits 1 at once. */
const crashOnRun = (version: string) => (js: string) => {
  const [first, ...rest] = js.split('\n');
  const crash = `if (process.argv[2] === 'run') { console.error('mesh-host ${version}: crashed on start'); process.exit(1); }`;
  return first!.startsWith('#!') ? [first, crash, ...rest].join('\n') : [crash, js].join('\n');
};
/** Passes its self-test and starts, but its first pass never ends (a timer keeps the process alive, as a stuck socket would). */
const hangInPass = (js: string) => {
  const pass = /last\s*=\s*await reconcile\d*\(host\d*,\s*/;
  if (!pass.test(js)) throw new Error(`cannot make a hanging version: the bundle has no ${pass}`);
  return js.replace(pass, (m) => `await new Promise(() => setInterval(() => {}, 60_000)); ${m}`);
};

/** Seconds between two times in ms, to a tenth. */
const seconds = (from: number, to: number) => `${((to - from) / 1000).toFixed(1)} s`;

let skipped: string | undefined;
let debDir: string;
/** Every version's .deb, by version, in the order they were added. */
const debs: Record<string, string> = {};

beforeAll(async () => {
  const missing = await missingTools();
  if (missing) {
    if (process.env.CI) throw new Error(`the system tests cannot run here: ${missing}`);
    skipped = missing;
    return;
  }
  debDir = temp('mesh-system-debs-');
  const builds: Array<[string, () => Promise<string>]> = [
    ...[...Object.values(V), ...HOTFIXES, DURING_OUTAGE, DURING_READ_ONLY].map((version, i): [string, () => Promise<string>] => [version, async () => withOwnUnits(await packageDeb(debDir, version), version, i)]),
    [BAD.selfTest, () => packageDeb(debDir, BAD.selfTest, truncated)],
    [BAD.crash, () => packageDeb(debDir, BAD.crash, crashOnRun(BAD.crash))],
    [BAD.hang, () => packageDeb(debDir, BAD.hang, hangInPass)],
  ];
  // Two at a time: this machine has two cores.
  for (let i = 0; i < builds.length; i += 2) {
    await Promise.all(builds.slice(i, i + 2).map(async ([version, build]) => (debs[version] = await build())));
  }
}, 20 * 60_000);

/** The scenarios on one machine of `release`, enrolled as `node`; `full` runs them all, else the subset named at the top. */
function scenarios(release: Release, name: string, node: string, full: boolean): void {
  describe(`a mesh host on a real ${name} machine with systemd as PID 1`, () => {
    let box: Container | undefined;
    let bootFailed: string | undefined;

    /** The machine, or the test is skipped (never under CI: there beforeAll has failed instead). */
    const machine = (ctx: TestContext): Container => {
      const why = skipped ?? bootFailed;
      if (why || !box) ctx.skip(`SKIPPED system tests: ${why ?? 'no machine'}`);
      return box!;
    };
    const later = full ? it : it.skip;
    /** Every report the node pushed, oldest first. */
    const reports = async (): Promise<Report[]> => {
      await git(fleet.checkout, 'fetch', '--quiet', 'origin', `+refs/heads/reports/${node}:refs/remotes/origin/reports/${node}`);
      const commits = (await git(fleet.checkout, 'rev-list', '--reverse', `origin/reports/${node}`)).split('\n');
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
    const show = async (unit: string, property: string) => (await box!.must('systemctl', 'show', `--property=${property}`, '--value', unit)).trim();
    const active = async (unit: string) => (await box!.exec('systemctl', ['is-active', unit])).stdout.trim();
    const installed = () => box!.must('dpkg-query', '--show', '--showformat=${Status} ${Version}', 'mesh-host');
    const upgradeState = async () => JSON.parse(await box!.must('cat', '/var/lib/mesh-host/upgrade.json'));
    /** The node's row in `mesh-cli status --json`, which exits 1 when a node's last pass failed. */
    const statusRow = async (code = 0) => {
      const status = await cli(fleet.checkout, 'status', '--json');
      expect(status.code, status.stdout + status.stderr).toBe(code);
      return JSON.parse(status.stdout).nodes.find((r: { node: string }) => r.node === node);
    };
    /** The journal's entries for `unit` since `sinceMs` (this machine's clock is the container's), as [time in ms, message]. */
    const journal = async (unit: string, sinceMs: number): Promise<Array<[number, string]>> => {
      const out = await box!.must('journalctl', '--no-pager', '-o', 'json', '-u', unit, `--since=@${Math.floor(sinceMs / 1000)}`);
      return out.split('\n').filter(Boolean).map((l) => JSON.parse(l)).map((e) => [Number(e.__REALTIME_TIMESTAMP) / 1000, String(e.MESSAGE)]);
    };
    const hostLine = (r: Report) => r.resources.find((l) => l.id === 'package:mesh-host');
    const declare = (resources: string, message: string) => fleet.commit({ [`nodes/${node}/base.yaml`]: `resources:\n${resources}` }, message);
    const helloResources = '  - type: file\n    path: /etc/systemd/system/hello.service\n    content: ' + JSON.stringify(HELLO) + '\n  - type: service\n    name: hello\n    enabled: true\n    running: true\n';
    const hostPackage = (version: string) =>
      `  - type: file\n    path: /etc/apt/sources.list.d/mesh.list\n    content: ${JSON.stringify(`deb [trusted=yes] ${packages.url}packages/ ./\n`)}\n  - type: package\n    name: mesh-host\n    version: "${version}"\n`;
    /** The unit's environment file: the host's options and its probation (MESH_HOST_PROBATION, read at each start). */
    const environment = (probation: string) => writeFileSync(join(box!.root, 'etc/mesh-host/environment'), `MESH_HOST_OPTIONS="--interval 2s"\nMESH_HOST_PROBATION=${probation}\n`);
    /** The version last recorded good; then the one running. */
    let good: string = V.first;
    /** `version`, which waited out its probation, applies `commit` and becomes the last good version, with no rollback run since `rollbacks` (an InvocationID). */
    const provesItself = async (version: string, commit: string, rollbacks: string) => {
      const fromNew = await reportWhere((r) => r.hostVersion === version && r.commit === commit, `from ${version}`);
      expect(fromNew.outcome, JSON.stringify(fromNew.resources)).toBe('applied');
      for (const until = Date.now() + 30_000; (await upgradeState()).lastGood?.version !== version && Date.now() < until; ) await new Promise((r) => setTimeout(r, 500));
      expect(await upgradeState()).toMatchObject({ lastGood: { version } });
      expect(await show('mesh-host-rollback', 'InvocationID')).toBe(rollbacks);
      expect(await statusRow()).toMatchObject({ outcome: 'applied', hostVersion: version });
      good = version;
    };

    let fleet: TestFleet;
    let packages: PackageServer;

    beforeAll(async () => {
      if (skipped) return;
      // Each machine its own fleet and package repository: `mesh-cli status` speaks for the whole fleet, and the other machine is off.
      fleet = await createFleet();
      packages = await servePackages(join(fleet.dir, 'packages'));
      for (const deb of Object.values(debs)) {
        const added = await cli(fleet.dir, 'packages', 'add', deb, '--dir', packages.dir);
        expect(added.code, added.stderr).toBe(0);
      }
      try {
        box = await boot(temp('mesh-system-'), release, (line) => console.log(line));
      } catch (e) {
        if (process.env.CI) throw e;
        bootFailed = `the ${name} container did not boot: ${(e as Error).message.split('\n')[0]}`;
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
      rmSync(join(m.root, 'etc/apt/sources.list.d/debian.sources'), { force: true });
      copyFileSync(debs[V.first]!, join(m.root, 'root/mesh-host.deb'));
      await m.must('dpkg', '-i', '/root/mesh-host.deb');
      expect(await installed()).toBe(`install ok installed ${V.first}`);

      const token = join(fleet.dir, `${node}.token`);
      expect((await cli(fleet.checkout, 'token', 'issue', node, '--out', token)).code).toBe(0);
      await git(fleet.checkout, 'push', '--quiet');
      copyFileSync(token, join(m.root, 'root/node.token'));
      expect(await m.must('mesh-host', 'enrol', '--token-file', '/root/node.token')).toMatch(new RegExp(`^enrolled as ${node} `));
      environment('2min');
      const commit = await declare(helloResources, `${node}: hello`);
      await m.must('systemctl', 'enable', '--now', 'mesh-host');

      const applied = await reportWhere((r) => r.commit === commit && r.outcome !== 'enrolled', `for ${commit.slice(0, 12)}`);
      expect(applied).toMatchObject({ hostVersion: V.first, outcome: 'applied' });
      expect(applied.resources).toEqual([
        { id: 'file:/etc/systemd/system/hello.service', result: 'created', changes: ['absent, should be a file'] },
        { id: 'service:hello', result: 'updated', changes: ['not-found → enabled', 'stopped → running'] },
      ]);
      expect(await active('hello')).toBe('active');
      expect((await m.exec('systemctl', ['is-enabled', 'hello'])).stdout).toBe('enabled\n');
      expect(await active('mesh-host')).toBe('active');

      const row = await statusRow();
      expect(row).toMatchObject({ outcome: 'applied', hostVersion: V.first });
      expect(row.unchecked ?? []).toEqual([]);
    });

    later('a changed unit file is read again before the service restarts (daemon-reload when systemd says it is stale); changed without restartOn, it is read again and the service keeps running', async (ctx) => {
      machine(ctx);
      const unit = '/etc/systemd/system/hello.service';
      const changed = HELLO.replace('[Service]\n', '[Service]\nEnvironment=GREETING=fleet\n');
      // Declared after the service: the unit file goes first all the same (the service needs it).
      const restarting = `  - type: service\n    name: hello\n    enabled: true\n    running: true\n    restartOn: [${unit}]\n  - type: file\n    path: ${unit}\n    content: ${JSON.stringify(changed)}\n`;
      const pid = await show('hello', 'MainPID');
      const first = await declare(restarting, `${node}: hello, restarted on its unit`);
      const restarted = await reportWhere((r) => r.commit === first, `for ${first.slice(0, 12)}`);
      expect(restarted.outcome).toBe('applied');
      expect(restarted.resources).toEqual([
        { id: `file:${unit}`, result: 'updated', changes: ['content differs'] },
        { id: 'service:hello', result: 'updated', changes: [`restarted: ${unit} changed`] },
      ]);
      expect(await show('hello', 'Environment')).toBe('GREETING=fleet');
      expect(await show('hello', 'NeedDaemonReload')).toBe('no');
      expect(await show('hello', 'MainPID')).not.toBe(pid);
      expect(await active('hello')).toBe('active');

      // Back to the first unit, without restartOn: read again, not restarted.
      const running = await show('hello', 'MainPID');
      const second = await declare(helloResources, `${node}: hello as it was`);
      const reread = await reportWhere((r) => r.commit === second, `for ${second.slice(0, 12)}`);
      expect(reread.outcome).toBe('applied');
      expect(reread.resources).toEqual([
        { id: `file:${unit}`, result: 'updated', changes: ['content differs'] },
        { id: 'service:hello', result: 'updated', changes: [`unit files read again (daemon-reload): ${unit} changed`] },
      ]);
      expect(await show('hello', 'Environment')).toBe('');
      expect(await show('hello', 'NeedDaemonReload')).toBe('no');
      expect(await show('hello', 'MainPID')).toBe(running);
      expect(await active('hello')).toBe('active');
    });

    later('a change to a file in reloadOn reloads the service (its ExecReload runs, its main process stays); one in restartOn restarts it', async (ctx) => {
      const m = machine(ctx);
      const unit = '/etc/systemd/system/hello.service';
      // Each reload leaves a line in /run/hello-reloads.
      const reloading = HELLO.replace('[Service]\n', '[Service]\nExecReload=/bin/sh -c "echo reloaded >> /run/hello-reloads"\n');
      const declared = (conf: string, main: string) =>
        `  - type: file\n    path: ${unit}\n    content: ${JSON.stringify(reloading)}\n  - type: file\n    path: /etc/hello.conf\n    content: "${conf}\\n"\n  - type: file\n    path: /etc/hello-main.conf\n    content: "${main}\\n"\n` +
        '  - type: service\n    name: hello\n    enabled: true\n    running: true\n    reloadOn: [/etc/hello.conf]\n    restartOn: [/etc/hello-main.conf]\n';
      const reloads = async () => (await m.exec('cat', ['/run/hello-reloads'])).stdout.split('\n').filter(Boolean).length;
      const first = await declare(declared('a', 'a'), `${node}: hello reloads on its configuration`);
      expect((await reportWhere((r) => r.commit === first, `for ${first.slice(0, 12)}`)).outcome).toBe('applied');
      const pid = await show('hello', 'MainPID');
      const before = await reloads();
      const second = await declare(declared('b', 'a'), `${node}: hello.conf changed`);
      const reloaded = await reportWhere((r) => r.commit === second, `for ${second.slice(0, 12)}`);
      expect(reloaded.resources).toEqual([
        { id: `file:${unit}`, result: 'unchanged' },
        { id: 'file:/etc/hello.conf', result: 'updated', changes: ['content differs'] },
        { id: 'file:/etc/hello-main.conf', result: 'unchanged' },
        { id: 'service:hello', result: 'updated', changes: ['reloaded: /etc/hello.conf changed'] },
      ]);
      expect(await reloads()).toBe(before + 1);
      expect(await show('hello', 'MainPID')).toBe(pid);
      // Both changed: restarted, not reloaded as well.
      const third = await declare(declared('c', 'b'), `${node}: hello.conf and hello-main.conf changed`);
      const restarted = await reportWhere((r) => r.commit === third, `for ${third.slice(0, 12)}`);
      expect(restarted.resources.at(-1)).toEqual({ id: 'service:hello', result: 'updated', changes: ['restarted: /etc/hello-main.conf changed'] });
      expect(await reloads()).toBe(before + 1);
      expect(await show('hello', 'MainPID')).not.toBe(pid);
      expect(await active('hello')).toBe('active');
      // As the scenarios after this one expect it.
      const back = await declare(helloResources, `${node}: hello as it was`);
      expect((await reportWhere((r) => r.commit === back, `for ${back.slice(0, 12)}`)).outcome).toBe('applied');
    });

    it('a declared good version from `serve --packages` is installed and self-tested, the old host exits, systemd starts the new one, which completes a pass and marks itself last good', async (ctx) => {
      const m = machine(ctx);
      const before = await show('mesh-host', 'MainPID');
      const commit = await declare(helloResources + hostPackage(V.good), `${node}: mesh-host ${V.good}`);
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
      expect(await installed()).toBe(`install ok installed ${V.good}`);
      expect(await active('mesh-host')).toBe('active');
      expect(await show('mesh-host', 'MainPID')).not.toBe(before);
      expect(await show('mesh-host', 'NRestarts')).toBe('1');
      for (const until = Date.now() + 30_000; (await upgradeState()).lastGood?.version !== V.good && Date.now() < until; ) await new Promise((r) => setTimeout(r, 500));
      expect(await upgradeState()).toMatchObject({ lastGood: { version: V.good } });
      expect(await m.must('ls', '/var/lib/mesh-host/last-good')).toContain('mesh-host.cjs');
      expect(await active('hello')).toBe('active');
      good = V.good;

      expect(await statusRow()).toMatchObject({ outcome: 'applied', hostVersion: V.good });
      // The package's postinst reloaded systemd: the unit files it installed are the ones in use.
      expect(await needsReload()).toEqual({ 'mesh-host.service': 'no', 'mesh-host-rollback.service': 'no' });
    });

    later('five good upgrades in a row (hotfixes) are not counted toward the start limit: no rollback, the last one runs and reports', async (ctx) => {
      const m = machine(ctx);
      for (const version of HOTFIXES) {
        const commit = await declare(helloResources + hostPackage(version), `${node}: mesh-host ${version}`);
        const report = await reportWhere((r) => r.hostVersion === version && r.commit === commit, `from ${version}`);
        expect(report.outcome, JSON.stringify(report.resources)).toBe('applied');
      }
      const last = HOTFIXES.at(-1)!;
      expect(await installed()).toBe(`install ok installed ${last}`);
      expect(await active('mesh-host')).toBe('active');
      // The rollback unit never ran, and nothing was refused.
      expect(await show('mesh-host-rollback', 'ExecMainStartTimestampMonotonic')).toBe('0');
      expect(await upgradeState()).not.toHaveProperty('rejected');
      expect(await needsReload()).toEqual({ 'mesh-host.service': 'no', 'mesh-host-rollback.service': 'no' });
      expect(await statusRow()).toMatchObject({ outcome: 'applied', hostVersion: last });
      for (const until = Date.now() + 30_000; (await upgradeState()).lastGood?.version !== last && Date.now() < until; ) await new Promise((r) => setTimeout(r, 500));
      good = last;
    }, 8 * 60_000);

    later('a version whose binary does not run fails its self-test: it is refused, the old host keeps running (same process) and its report says why', async (ctx) => {
      const m = machine(ctx);
      const pid = await show('mesh-host', 'MainPID');
      const commit = await declare(helloResources + hostPackage(BAD.selfTest), `${node}: mesh-host ${BAD.selfTest}`);
      const failed = await reportWhere((r) => r.commit === commit && hostLine(r)?.result === 'failed', `with ${BAD.selfTest} failing`);
      expect(failed).toMatchObject({ hostVersion: good, outcome: 'failed' });
      const error = hostLine(failed)!.error!;
      expect(error).toMatch(new RegExp(`^the new host binary mesh-host ${BAD.selfTest} failed its self-test, so it does not take over: this host \\(${good}\\) keeps running and ${good} was put back\n  \\$ node /usr/lib/mesh-host/mesh-host.cjs self-test --json  \\(exit 1\\)\n`));
      expect(error).toContain('SyntaxError');
      // The machine: the good version installed, the same process running, no restart, no rollback.
      expect(await installed()).toBe(`install ok installed ${good}`);
      expect(await active('mesh-host')).toBe('active');
      expect(await show('mesh-host', 'MainPID')).toBe(pid);
      expect(await show('mesh-host-rollback', 'ExecMainStartTimestampMonotonic')).toBe('0');
      expect(await upgradeState()).toMatchObject({ lastGood: { version: good }, rejected: { version: BAD.selfTest } });
      const row = await statusRow(1);
      expect(row).toMatchObject({ outcome: 'failed', hostVersion: good });
      expect(row.errors).toEqual([expect.stringContaining(`the new host binary mesh-host ${BAD.selfTest} failed its self-test`)]);
    }, 4 * 60_000);

    it('a version that passes its self-test but crash-loops at start hits the start limit; OnFailure= rolls it back, the last good version runs again and the report says why', async (ctx) => {
      const m = machine(ctx);
      const since = Date.now();
      const commit = await declare(helloResources + hostPackage(BAD.crash), `${node}: mesh-host ${BAD.crash}`);
      await reportWhere((r) => r.commit === commit && hostLine(r)?.changes?.[1]?.startsWith(`self-test of mesh-host ${BAD.crash} passed`) === true, `handing over to ${BAD.crash}`);
      const after = await reportWhere((r) => r.commit === commit && new RegExp(`rolled back from ${BAD.crash}`).test(hostLine(r)?.error ?? ''), `saying ${BAD.crash} was rolled back`, 180_000);
      const reported = Date.now();
      expect(after).toMatchObject({ hostVersion: good, outcome: 'failed' });
      expect(hostLine(after)!.error).toMatch(new RegExp(`^mesh-host ${BAD.crash} is refused on this machine since .*: rolled back from ${BAD.crash} to ${good}: after it passed its self-test, it did not complete a pass and a report \\(mesh-host.service failed: exit-code; last exit: exited 1, and systemd stopped restarting it \\(start limit\\)\\)\n`));

      // The machine's own account: the good version installed and running, and the journal has the crash loop, the start limit and the rollback.
      expect(await installed()).toBe(`install ok installed ${good}`);
      expect(await active('mesh-host')).toBe('active');
      expect(await upgradeState()).toMatchObject({ lastGood: { version: good }, rejected: { version: BAD.crash } });
      const host = await journal('mesh-host', since);
      // systemd's own lines: journald may not tie a process that is already gone to its unit, so the crashed version's own words can be missing.
      const crashes = host.filter(([, msg]) => /Main process exited, code=exited, status=1\/FAILURE/.test(msg));
      const limitHit = host.find(([, msg]) => /Start request repeated too quickly/.test(msg));
      // The rollback comes at the start limit, after StartLimitBurst (5) crashes, on both releases.
      expect(crashes).toHaveLength(5);
      expect(limitHit).toBeDefined();
      const rollback = await journal('mesh-host-rollback', since);
      const runs = rollback.filter(([, msg]) => /^Starting mesh-host-rollback.service/.test(msg));
      if (release === 'bookworm') {
        // systemd 252 runs OnFailure= only when the unit fails for good: once, at the start limit.
        expect(runs).toHaveLength(1);
      } else {
        // systemd 257 (Debian 13) runs OnFailure= after each failed run too, while the unit waits to restart: those runs
        // of the rollback unit do nothing (exit 4) and leave the start counter alone, so the crash loop still reaches the limit.
        expect(runs.length).toBeGreaterThanOrEqual(2);
      }
      const rolledBack = rollback.filter(([, msg]) => /^Finished mesh-host-rollback.service|mesh-host-rollback.service: Deactivated successfully/.test(msg)).at(-1);
      expect(rolledBack, rollback.map(([, msg]) => msg).join('\n')).toBeDefined();
      expect(rolledBack![0]).toBeGreaterThanOrEqual(limitHit![0]);
      expect(await needsReload()).toEqual({ 'mesh-host.service': 'no', 'mesh-host-rollback.service': 'no' });
      const row = await statusRow(1);
      expect(row).toMatchObject({ outcome: 'failed', hostVersion: good });
      expect(row.errors).toEqual([expect.stringContaining(`rolled back from ${BAD.crash} to ${good}`)]);
      console.log(`[${release}] crash loop: first crash → rollback done ${seconds(crashes[0]![0], rolledBack![0])}, → rollback reported (seen by the operator) ${seconds(crashes[0]![0], reported)}; the rollback unit ran ${runs.length} time(s)`);
    }, 5 * 60_000);

    later('a version that starts but completes no pass within its probation exits 69, which the unit does not restart: it fails, and is rolled back', async (ctx) => {
      const m = machine(ctx);
      environment('15s');
      const since = Date.now();
      const commit = await declare(helloResources + hostPackage(BAD.hang), `${node}: mesh-host ${BAD.hang}`);
      await reportWhere((r) => r.commit === commit && hostLine(r)?.changes?.[1]?.startsWith(`self-test of mesh-host ${BAD.hang} passed`) === true, `handing over to ${BAD.hang}`);
      const after = await reportWhere((r) => r.commit === commit && new RegExp(`rolled back from ${BAD.hang}`).test(hostLine(r)?.error ?? ''), `saying ${BAD.hang} was rolled back`, 180_000);
      expect(after).toMatchObject({ hostVersion: good, outcome: 'failed' });
      expect(hostLine(after)!.error).toMatch(new RegExp(`^mesh-host ${BAD.hang} is refused on this machine since .*: rolled back from ${BAD.hang} to ${good}: after it passed its self-test, it did not complete a pass and a report \\(mesh-host.service: no pass completed within its probation\\)\n`));
      expect(await installed()).toBe(`install ok installed ${good}`);
      expect(await active('mesh-host')).toBe('active');
      expect(await upgradeState()).toMatchObject({ lastGood: { version: good }, rejected: { version: BAD.hang } });
      // The hung version was started once and exited 69, which systemd took as a failure without restarting it.
      const host = (await journal('mesh-host', since)).map(([, msg]) => msg);
      expect(host.filter((msg) => /Main process exited, code=exited, status=69/.test(msg))).toHaveLength(1);
      expect(host.filter((msg) => /Scheduled restart job/.test(msg))).toHaveLength(1); // the handover's, none after the 69
      const row = await statusRow(1);
      expect(row.errors).toEqual([expect.stringContaining(`rolled back from ${BAD.hang} to ${good}: after it passed its self-test, it did not complete a pass and a report (mesh-host.service: no pass completed within its probation)`)]);
    }, 5 * 60_000);

    later('the fleet server down during an upgrade: the new version waits past its probation without being rolled back, and proves itself once the server is back', async (ctx) => {
      const m = machine(ctx);
      // The probation is still 15 s; the server stays down for three of them.
      const rollbacks = await show('mesh-host-rollback', 'InvocationID');
      const commit = await declare(helloResources + hostPackage(DURING_OUTAGE), `${node}: mesh-host ${DURING_OUTAGE}`);
      await reportWhere((r) => r.commit === commit && hostLine(r)?.result === 'updated', `with the upgrade to ${DURING_OUTAGE}`);
      const port = new URL(fleet.server.url).port;
      await fleet.server.stop();
      const down = Date.now();
      try {
        // The new version starts (systemd), cannot reach the fleet, and is not rolled back past its probation.
        await new Promise((r) => setTimeout(r, 45_000));
        const why = async () => (await m.exec('journalctl', ['--no-pager', '-n', '40', '-u', 'mesh-host', '-u', 'mesh-host-rollback'])).stdout;
        expect(await installed(), await why()).toBe(`install ok installed ${DURING_OUTAGE}`);
        expect(await active('mesh-host')).toBe('active');
        expect(await show('mesh-host-rollback', 'InvocationID')).toBe(rollbacks);
        expect(await upgradeState()).toMatchObject({ lastGood: { version: good }, pending: { to: DURING_OUTAGE } });
        const ran = (await journal('mesh-host', down)).map(([, msg]) => msg);
        expect(ran.filter((msg) => /fleet unreachable|"disconnected"|cannot reach/.test(msg)).length, ran.join('\n')).toBeGreaterThan(0);
      } finally {
        fleet.server = await startServer(fleet.server.data, Number(port));
      }
      await provesItself(DURING_OUTAGE, commit, rollbacks);
    }, 5 * 60_000);

    later('the state folder read-only when the new version starts (a full or read-only /var): its passes fail for the machine, its probation starts again, it is not rolled back, and it proves itself once the folder is writable', async (ctx) => {
      const m = machine(ctx);
      // The probation is still 15 s; the folder stays read-only for three of them.
      const rollbacks = await show('mesh-host-rollback', 'InvocationID');
      const old = await show('mesh-host', 'MainPID');
      const commit = await declare(helloResources + hostPackage(DURING_READ_ONLY), `${node}: mesh-host ${DURING_READ_ONLY}`);
      await reportWhere((r) => r.commit === commit && hostLine(r)?.result === 'updated', `with the upgrade to ${DURING_READ_ONLY}`);
      // The old host exits after its report; systemd starts the new one 5 s later (RestartSec): the folder is bound read-only onto itself in between.
      for (const until = Date.now() + 30_000; (await show('mesh-host', 'MainPID')) === old; await new Promise((r) => setTimeout(r, 100))) {
        if (Date.now() > until) throw new Error(`the host ${good} did not exit after handing over to ${DURING_READ_ONLY}`);
      }
      await m.must('mount', '--bind', '/var/lib/mesh-host', '/var/lib/mesh-host');
      await m.must('mount', '-o', 'remount,bind,ro', '/var/lib/mesh-host');
      const from = Date.now();
      try {
        await new Promise((r) => setTimeout(r, 45_000));
        const why = async () => (await m.exec('journalctl', ['--no-pager', '-n', '40', '-u', 'mesh-host', '-u', 'mesh-host-rollback'])).stdout;
        expect(await installed(), await why()).toBe(`install ok installed ${DURING_READ_ONLY}`);
        expect(await active('mesh-host'), await why()).toBe('active');
        expect(await show('mesh-host-rollback', 'InvocationID')).toBe(rollbacks);
        const ran = (await journal('mesh-host', from)).map(([, msg]) => msg);
        expect(ran.filter((msg) => msg.includes('its probation starts again')).length, ran.join('\n')).toBeGreaterThan(1);
        expect(ran.filter((msg) => /exiting for rollback|Main process exited/.test(msg)), ran.join('\n')).toEqual([]);
      } finally {
        await m.must('umount', '/var/lib/mesh-host');
      }
      expect(await upgradeState()).toMatchObject({ lastGood: { version: good }, pending: { to: DURING_READ_ONLY } });
      await provesItself(DURING_READ_ONLY, commit, rollbacks);
      environment('2min');
    }, 5 * 60_000);

    later('a power cut in the middle of a pass: on the next boot the host starts again, finishes the declaration, and owns exactly what it declares', async (ctx) => {
      const m = machine(ctx);
      const slow = '  - type: file\n    path: /etc/before-cut\n    content: "1\\n"\n  - type: command\n    name: slow\n    run: "touch /var/tmp/sleeping && sleep 20 && touch /var/tmp/slept"\n    shell: true\n    creates: /var/tmp/slept\n  - type: file\n    path: /etc/after-cut\n    content: "2\\n"\n';
      const commit = await declare(helloResources + hostPackage(good) + slow, `${node}: a slow pass`);
      for (const until = Date.now() + 60_000; !existsSync(join(m.root, 'var/tmp/sleeping')); await new Promise((r) => setTimeout(r, 200))) {
        if (Date.now() > until) throw new Error('the slow command never started');
      }
      expect(existsSync(join(m.root, 'etc/before-cut'))).toBe(true);
      expect(existsSync(join(m.root, 'etc/after-cut'))).toBe(false);
      const pid = await show('mesh-host', 'MainPID');
      await m.powerCut();
      expect(await show('mesh-host', 'MainPID')).not.toBe(pid);

      const done = await reportWhere((r) => r.commit === commit && r.outcome === 'applied', `applying ${commit.slice(0, 12)} after the power cut`, 120_000);
      expect(done.hostVersion).toBe(good);
      expect(readFileSync(join(m.root, 'etc/after-cut'), 'utf8')).toBe('2\n');
      expect(existsSync(join(m.root, 'var/tmp/slept'))).toBe(true);
      expect(await active('mesh-host')).toBe('active');
      expect(await active('hello')).toBe('active');
      expect(await show('mesh-host-rollback', 'ExecMainStartTimestampMonotonic')).toBe('0'); // a new boot: the rollback did not run in it
      // Nothing half done is left: the host owns exactly what it declares (a command owns nothing), none of it an unfinished intent.
      const state = JSON.parse(await m.must('mesh-host', 'state', '--json'));
      expect(state.owned.map((o: { id: string }) => o.id).sort()).toEqual(['file:/etc/after-cut', 'file:/etc/apt/sources.list.d/mesh.list', 'file:/etc/before-cut', 'file:/etc/systemd/system/hello.service', 'package:mesh-host', 'service:hello']);
      expect(state.owned.filter((o: { state: string }) => o.state === 'intent')).toEqual([]);
      expect(await statusRow()).toMatchObject({ outcome: 'applied', hostVersion: good, commit });
    }, 5 * 60_000);
  });
}

scenarios('bookworm', 'Debian 12 (bookworm)', 'web-bookworm', true);
scenarios('trixie', 'Debian 13 (trixie)', 'web-trixie', false);
