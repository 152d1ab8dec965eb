/**
 * The host upgrading itself through its own declaration, end to end: real mesh-host .deb files
 * built by `npm run package:deb`, a real flat apt repository indexed by `mesh-cli packages add`
 * and served over HTTP by `mesh-cli serve --packages`, the real apt-get and dpkg installing into
 * a temporary --root. systemd itself is simulated (test/helpers/supervisor.ts) because PID 1 here
 * is not systemd; the simulation reads the unit files the package installed into the root.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDeb, prepareDpkgRoot } from './helpers/apt-repo.js';
import { cli, createFleet, git, newMachine, runProgram, type TestFleet } from './helpers/fleet.js';
import { Supervisor } from './helpers/supervisor.js';
import { buildHostDebs, dpkgVersion, servePackages, VERSIONS as V, type PackageServer } from './helpers/host-debs.js';

const MAIN = 'mesh-host.service';
const realStatus = () => createHash('sha256').update(readFileSync('/var/lib/dpkg/status')).digest('hex');
const statusBefore = realStatus();

interface Line { id: string; result: string; changes?: string[]; error?: string }
interface Report { hostVersion: string; outcome: string; sequence: number; resources: Line[] }

/**
 * Give the root the /bin/sh every Debian machine has (this machine's, with the libraries it
 * loads): dpkg runs the package's maintainer scripts chrooted into the root.
 */
function withShell(root: string): string {
  const libs = [...execFileSync('ldd', ['/bin/sh']).toString().matchAll(/(\/\S+) \(0x/g)].map((m) => m[1]!);
  for (const [from, to] of [['/bin/sh', '/bin/sh'], ...libs.map((l) => [l, l])] as const) {
    mkdirSync(join(root, dirname(to)), { recursive: true });
    copyFileSync(realpathSync(from), join(root, to));
    chmodSync(join(root, to), 0o755);
  }
  return root;
}

describe('the host upgrades itself through its own declaration', () => {
  let fleet: TestFleet;
  let packages: PackageServer;
  let root: string;
  let supervisor: Supervisor;
  let firstAdd: string | undefined;
  const declare = (version: string, extra = '') => {
    const source = `deb [trusted=yes] ${packages.url}packages/ ./\n`;
    const yaml = `resources:\n  - type: file\n    path: /etc/apt/sources.list.d/mesh.list\n    content: ${JSON.stringify(source)}\n  - type: package\n    name: mesh-host\n    version: "${version}"\n${extra}`;
    return fleet.commit({ 'nodes/web-1/base.yaml': yaml }, `web-1: mesh-host ${version}`);
  };
  /** Every report web-1 pushed, oldest first. */
  const reports = async (): Promise<Report[]> => {
    await git(fleet.checkout, 'fetch', '--quiet', 'origin', '+refs/heads/reports/*:refs/remotes/origin/reports/*');
    const commits = (await git(fleet.checkout, 'rev-list', '--reverse', 'origin/reports/web-1')).split('\n');
    return Promise.all(commits.map(async (c) => JSON.parse(await git(fleet.checkout, 'show', `${c}:status.json`)) as Report));
  };
  const reportWhere = async (test: (r: Report) => boolean, what: string): Promise<Report> => {
    for (const until = Date.now() + 60_000; Date.now() < until; await new Promise((r) => setTimeout(r, 300))) {
      const found = (await reports().catch(() => [])).find(test);
      if (found) return found;
    }
    throw new Error(`no report ${what} within 60 s; the host said:\n${supervisor.output.slice(-40).join('\n')}`);
  };
  const hostLine = (r: Report) => r.resources.find((l) => l.id === 'package:mesh-host');
  /** The host's debug lines about the self-test of a new version of its own package. */
  const selfTested = () => supervisor.output.map((l) => l.slice(l.indexOf(': ') + 2)).filter((l) => l.startsWith('{') && l.includes('"host package self-tested"')).map((l) => JSON.parse(l) as Record<string, unknown>);
  const mainEvents = () => supervisor.events.filter((e) => e.unit === MAIN).map((e) => `${e.event}${e.code !== undefined ? ` ${e.code}` : ''}${e.result ? ` ${e.result}` : ''}`);

  beforeAll(async () => {
    fleet = await createFleet();
    const debs = await buildHostDebs(join(fleet.dir, 'debs'));
    packages = await servePackages(join(fleet.dir, 'packages'));
    for (const deb of Object.values(debs)) {
      const added = await cli(fleet.dir, 'packages', 'add', deb, '--dir', packages.dir);
      expect(added.code, added.stderr).toBe(0);
      firstAdd ??= added.stdout;
    }
    // The machine: a dpkg database that has node (the host runs on this machine's real node), then A, installed by hand.
    root = withShell(prepareDpkgRoot(newMachine(join(fleet.dir, 'machines/web-1'))));
    const node = buildDeb(fleet.dir, { name: 'nodejs', version: process.versions.node });
    for (const deb of [node, debs[V.A]!]) execFileSync('dpkg', [`--root=${root}`, `--log=${root}/var/log/dpkg.log`, '-i', deb], { stdio: 'pipe' });
    const token = join(fleet.dir, 'web-1.token');
    expect((await cli(fleet.checkout, 'token', 'issue', 'web-1', '--out', token)).code).toBe(0);
    await git(fleet.checkout, 'push', '--quiet');
    const enrolled = await runProgram('node', [join(root, 'usr/lib/mesh-host/mesh-host.cjs'), 'enrol', '--token-file', token, '--root', root], root);
    expect(enrolled.code, enrolled.stderr).toBe(0);
    // At log level debug, so that the self-test's own line can be looked for too.
    writeFileSync(join(root, 'etc/mesh-host/environment'), 'MESH_HOST_OPTIONS="--interval 1s"\nMESH_HOST_PROBATION=10s\nMESH_LOG_LEVEL=debug\n');
    // The unit's own values, played 50 times faster: RestartSec 5s → 100 ms, the start limit's 10 min → 12 s.
    supervisor = new Supervisor(root, { timeScale: 0.02 });
    supervisor.start(MAIN);
  }, 240_000);
  afterAll(async () => {
    await supervisor?.stop();
    await packages?.stop();
    await fleet?.close();
  });

  it('the package is a real .deb with the host, its launcher and its units, and the repository indexes every version', () => {
    const deb = join(fleet.dir, 'debs', `mesh-host_${V.A}_all.deb`);
    expect(execFileSync('dpkg-deb', ['--field', deb, 'Package', 'Version', 'Architecture', 'Depends']).toString()).toBe(`Package: mesh-host\nVersion: ${V.A}\nArchitecture: all\nDepends: nodejs (>= 20.19)\n`);
    const files = execFileSync('dpkg-deb', ['--contents', deb]).toString();
    for (const f of ['./usr/lib/mesh-host/mesh-host.cjs', './usr/lib/mesh-host/mesh-host.mjs', './usr/bin/mesh-host', './usr/lib/systemd/system/mesh-host.service', './usr/lib/systemd/system/mesh-host-rollback.service', './var/lib/mesh-host/', './etc/mesh-host/']) expect(files).toContain(` ${f}\n`);
    expect(readFileSync(join(root, 'usr/bin/mesh-host'), 'utf8')).toContain('exec node /usr/lib/mesh-host/mesh-host.cjs "$@"\n');
    // systemd cannot run units here, but it can check them: every key is known and every value well-formed.
    const units = ['mesh-host.service', 'mesh-host-rollback.service'].map((u) => join(root, 'usr/lib/systemd/system', u));
    const verify = spawnSync('systemd-analyze', ['verify', '--man=no', ...units], { encoding: 'utf8' });
    expect([verify.status, verify.stdout, verify.stderr]).toEqual([0, '', '']);
    const index = readFileSync(join(packages.dir, 'Packages'), 'utf8');
    expect([...index.matchAll(/^Version: (.*)$/gm)].map((m) => m[1]).sort()).toEqual(Object.values(V));
    expect(firstAdd).toBe([
      `added mesh-host ${V.A} (all) in ${packages.dir}; 1 package file(s) indexed`,
      'nodes use it through a file resource at /etc/apt/sources.list.d/mesh.list holding:',
      '  deb [trusted=yes] http://HOST:PORT/packages/ ./',
      '(the repository is unsigned: [trusted=yes] tells apt to accept it, which is safe only over a network you trust to reach the fleet server)',
      '',
    ].join('\n'));
  });

  it('packages add accepts the same file again and refuses other contents under a published version', async () => {
    const again = await cli(fleet.dir, 'packages', 'add', join(fleet.dir, 'debs', `mesh-host_${V.A}_all.deb`), '--dir', packages.dir, '--json');
    expect(JSON.parse(again.stdout)).toMatchObject({ package: 'mesh-host', version: V.A, added: false, indexed: 5 });
    const other = await cli(fleet.dir, 'packages', 'add', buildDeb(fleet.dir, { name: 'mesh-host', version: V.A }), '--dir', packages.dir);
    expect(other.code).toBe(2);
    expect(other.stderr).toBe(`mesh-cli: mesh-host_${V.A}_all.deb is already in ${packages.dir} with other contents: apt keeps packages by version, so a published version must never change. Build the change with a new version (MESH_BUILD_VERSION=…)\n`);
  });

  it('version A runs under the supervisor and reports; a commit declaring B installs B, smoke-runs it, reports and exits; B starts and reports', async () => {
    await reportWhere((r) => r.hostVersion === V.A && r.outcome === 'applied', `from ${V.A}`);
    await declare(V.B);
    const handover = await reportWhere((r) => hostLine(r)?.result === 'updated', 'with the upgrade to B');
    expect(handover.hostVersion).toBe(V.A);
    expect(hostLine(handover)).toEqual({ id: 'package:mesh-host', result: 'updated', changes: [`version ${V.A} → ${V.B}`, `self-test of mesh-host ${V.B} passed: this host (${V.A}) exits after this pass's report and the supervisor starts ${V.B}`] });
    expect(selfTested()).toContainEqual(expect.objectContaining({ package: 'mesh-host', installed: V.B, running: V.A, passed: true }));
    const fromB = await reportWhere((r) => r.hostVersion === V.B, `from ${V.B}`);
    expect(fromB).toMatchObject({ outcome: 'applied', resources: expect.arrayContaining([{ id: 'package:mesh-host', result: 'unchanged' }]) });
    expect(mainEvents()).toEqual(['start', 'exit 0', 'start']);
    expect(dpkgVersion(root)).toBe(V.B);
    // B, once good, is kept with the loader every rollback unit runs: the same text as the package's (two copies of it: scripts/package-deb.mjs, agent/upgrade/state.ts).
    const kept = join(root, 'var/lib/mesh-host/last-good/mesh-host.mjs');
    for (const until = Date.now() + 10_000; !existsSync(kept) && Date.now() < until; ) await new Promise((r) => setTimeout(r, 100));
    expect(readFileSync(kept, 'utf8')).toBe(readFileSync(join(root, 'usr/lib/mesh-host/mesh-host.mjs'), 'utf8'));
  });

  it('a version C whose binary does not run fails the pass with its self-test output, B is put back and keeps running and reporting', async () => {
    const pid = supervisor.running(MAIN)?.pid;
    await declare(V.C);
    const failed = await reportWhere((r) => hostLine(r)?.result === 'failed', 'with C failing');
    expect(failed).toMatchObject({ hostVersion: V.B, outcome: 'failed' });
    const error = hostLine(failed)!.error!;
    expect(error).toMatch(new RegExp(`^the new host binary mesh-host ${V.C} failed its self-test, so it does not take over: this host \\(${V.B}\\) keeps running and ${V.B} was put back\n  \\$ node /usr/lib/mesh-host/mesh-host.cjs self-test --json  \\(exit 1\\)\n`));
    expect(error).toContain('SyntaxError');
    expect(selfTested()).toContainEqual(expect.objectContaining({ installed: V.C, running: V.B, passed: false }));
    expect(dpkgVersion(root)).toBe(V.B);
    // Still the same process, and still reporting: a later commit is applied, and C is refused without installing it again.
    await declare(V.C, '  - type: file\n    path: /etc/motd\n    content: "still here\\n"\n');
    const later = await reportWhere((r) => r.resources.some((l) => l.id === 'file:/etc/motd'), 'with /etc/motd');
    expect(later.hostVersion).toBe(V.B);
    expect(hostLine(later)?.error).toMatch(new RegExp(`^mesh-host ${V.C} is refused on this machine since .*: its self-test failed:\n`));
    expect(supervisor.running(MAIN)?.pid).toBe(pid);
    expect(mainEvents()).toEqual(['start', 'exit 0', 'start']);
  });

  it('a version D that passes its self-test but crashes on start is rolled back to B without a person, and the report says so', async () => {
    // As systemd 254 and later (Debian 13) do: OnFailure= runs after every failed run, not only at the start limit.
    supervisor.everyFailedRun = true;
    await declare(V.D);
    await reportWhere((r) => hostLine(r)?.changes?.[1]?.startsWith(`self-test of mesh-host ${V.D} passed`) === true, 'handing over to D');
    const after = await reportWhere((r) => /rolled back from/.test(hostLine(r)?.error ?? ''), 'saying D was rolled back');
    supervisor.everyFailedRun = false;
    for (const until = Date.now() + 30_000; supervisor.running('mesh-host-rollback.service') && Date.now() < until; ) await new Promise((r) => setTimeout(r, 100));
    expect(after).toMatchObject({ hostVersion: V.B, outcome: 'failed' });
    expect(hostLine(after)!.error).toMatch(new RegExp(`^mesh-host ${V.D} is refused on this machine since .*: rolled back from ${V.D} to ${V.B}: after it passed its self-test, it did not complete a pass and a report \\(mesh-host.service failed: exit-code; last exit: exited 1, and systemd stopped restarting it \\(start limit\\)\\)\n`));
    expect(dpkgVersion(root)).toBe(V.B);
    // B exits for D; D crashes until the unit has started StartLimitBurst (5) times within StartLimitIntervalSec (10 min,
    // 12 s here): the next start fails the unit, OnFailure= runs the rollback unit, and that starts B again. Each crash
    // before runs the rollback unit too, which sees the unit restarting, does nothing (exit 4) and leaves the start counter alone.
    const events = mainEvents();
    const crashes = events.slice(4, events.indexOf('failed exit-code'));
    expect(events.slice(0, 4)).toEqual(['start', 'exit 0', 'start', 'exit 0']);
    expect(crashes).toEqual(Array(crashes.length / 3).fill(['start', 'exit 1', 'failed exit-code, restarting']).flat());
    // The start limit counts every start in the window, the two before D's crashes too when they fall in it: on a fast
    // machine three crashes fill it (as on a real one), on a slow one more; the exact count in the window is checked below.
    expect(crashes.length).toBeGreaterThanOrEqual(3 * 3);
    expect(events.slice(4 + crashes.length)).toEqual(['failed exit-code', 'reset-failed', 'start']);
    const limitHit = supervisor.events.find((e) => e.unit === MAIN && e.result === 'exit-code')!.at;
    expect(supervisor.events.filter((e) => e.unit === MAIN && e.event === 'start' && e.at <= limitHit && limitHit - e.at < 12_000)).toHaveLength(5);
    const rollbacks = supervisor.events.filter((e) => e.unit === 'mesh-host-rollback.service').map((e) => `${e.event} ${e.code ?? ''}`.trim());
    // One run rolled back (exit 0); every other run found the unit restarting or running again and did nothing (exit 4).
    // At this time scale a run may start for one crash and find the unit already failed for good: it acts on what it finds.
    expect(rollbacks.filter((e) => e === 'exit 0')).toHaveLength(1);
    expect(rollbacks).toEqual(rollbacks.map((e, i) => (i % 2 === 0 ? 'start' : e === 'exit 0' ? 'exit 0' : 'exit 4')));
    expect(rollbacks.length).toBeGreaterThan(2);
    const waited = supervisor.output.filter((l) => /mesh-host-rollback.service.*and systemd restarts it \(mesh-host.service: (auto-restart|running)\): no rollback before/.test(l));
    expect(waited).toHaveLength(rollbacks.length / 2 - 1);
  });

  it('a version E that passes its self-test but hangs in its first pass exits when its probation ends and is rolled back', async () => {
    await declare(V.E);
    const after = await reportWhere((r) => new RegExp(`rolled back from ${V.E}`).test(hostLine(r)?.error ?? ''), 'saying E was rolled back');
    expect(after.hostVersion).toBe(V.B);
    expect(hostLine(after)!.error).toMatch(new RegExp(`^mesh-host ${V.E} is refused on this machine since .*: rolled back from ${V.E} to ${V.B}: after it passed its self-test, it did not complete a pass and a report \\(mesh-host.service: no pass completed within its probation\\)\n`));
    // Exit status 69 is in RestartPreventExitStatus: the unit fails at once instead of restarting a hung version.
    expect(mainEvents().slice(-6)).toEqual(['exit 0', 'start', 'exit 69', 'failed exit-code', 'reset-failed', 'start']);
    expect(dpkgVersion(root)).toBe(V.B);
  });

  it('nothing outside the temporary root was touched', () => {
    for (const path of ['/usr/lib/mesh-host', '/usr/bin/mesh-host', '/usr/lib/systemd/system/mesh-host.service', '/lib/systemd/system/mesh-host.service', '/var/lib/mesh-host', '/etc/mesh-host']) expect(existsSync(path), path).toBe(false);
    expect(realStatus()).toBe(statusBefore);
    expect(execFileSync('ls', ['/var/cache/apt/archives']).toString()).not.toContain('mesh-host');
  });
});
