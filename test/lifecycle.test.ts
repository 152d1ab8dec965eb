/**
 * The lifecycle of a machine, end to end: unmanaged → hosted → enrolled ⇄ disconnected,
 * enrolment that reports before it changes anything, ineligible nodes, single-use tokens,
 * re-enrolment that revokes, retire and revoke, a lost store recovered from the last report,
 * the first node from a bundle, and what `mesh-host state` says of a change left unverified.
 * Real git http-backend, real git binary, real ssh-keygen, real roots; the built mesh-cli and
 * mesh-host run as processes.
 */
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clockLine } from '../agent/briefing.js';
import { fleetHttp } from '../agent/fleet/http.js';
import { cli, createFleet, git, gitIn, hostCmd, MESH_HOST, newMachine, runProgram, startServer, type TestFleet } from './helpers/fleet.js';
import { snapshot } from './helpers/snapshot.js';
import { tempDirs } from './helpers/tmp.js';

const tempDir = tempDirs();

const host = async (root: string, ...args: string[]) => {
  const r = await hostCmd(root, ...args, '--json');
  return { ...r, body: r.code === 0 || r.stdout.startsWith('{') ? JSON.parse(r.stdout || 'null') : null };
};

/** Issue a token for `node` into a file (pushing the commit unless `push` is false); returns the file. */
async function token(fleet: TestFleet, node: string, opts: { push?: boolean; expires?: string; name?: string } = {}): Promise<string> {
  const file = join(fleet.dir, opts.name ?? `${node}-${Date.now()}.token`);
  const r = await cli(fleet.checkout, 'token', 'issue', node, '--out', file, ...(opts.expires ? ['--expires', opts.expires] : []));
  expect(r.code, r.stderr).toBe(0);
  if (opts.push !== false) await git(fleet.checkout, 'push', '--quiet');
  return file;
}

/** A simulated machine with a dpkg database (so its briefing passes), not enrolled. */
function machine(fleet: TestFleet, node: string): string {
  const root = newMachine(join(fleet.dir, 'machines', node));
  mkdirSync(join(root, 'var/lib/dpkg'), { recursive: true });
  writeFileSync(join(root, 'var/lib/dpkg/status'), '', { flag: 'a' });
  return root;
}

/** Every report on `node`'s branch, oldest first, with the exact text of its status.json. */
async function reports(fleet: TestFleet, node: string) {
  await git(fleet.checkout, 'fetch', '--quiet', 'origin', '+refs/heads/reports/*:refs/remotes/origin/reports/*', '+refs/heads/main:refs/remotes/origin/main');
  const commits = (await git(fleet.checkout, 'log', '--reverse', '--format=%H', `origin/reports/${node}`)).split('\n');
  return Promise.all(
    commits.map(async (commit) => {
      const text = (await runProgram('git', ['cat-file', 'blob', `${commit}:status.json`], fleet.checkout)).stdout;
      return { commit, text, report: JSON.parse(text) };
    }),
  );
}

const lastReport = async (fleet: TestFleet, node: string) => (await reports(fleet, node)).at(-1)!.report;

async function statusRow(fleet: TestFleet, node: string) {
  const r = await cli(fleet.checkout, 'status', '--json');
  expect([0, 1, 4], r.stderr).toContain(r.code); // the fleet's state by the exit table; never 2, 3 or 70
  return (JSON.parse(r.stdout) as { nodes: Array<Record<string, unknown>> }).nodes.find((n) => n.node === node)!;
}

const sha256 = async (text: string) => 'sha256:' + (await import('node:crypto')).createHash('sha256').update(text).digest('hex');

describe('enrolment', () => {
  let fleet: TestFleet;
  beforeAll(async () => {
    fleet = await createFleet();
  });
  afterAll(async () => fleet?.close());

  it('pushes profile, inventory and briefing in the first report, before any change to the root', async () => {
    await fleet.commit({ 'nodes/web-1/base.yaml': 'resources:\n  - type: file\n    path: /etc/motd\n    content: "managed\\n"\n  - type: directory\n    path: /srv/app\n' }, 'web-1');
    const root = machine(fleet, 'web-1');
    writeFileSync(join(root, 'etc/os-release'), 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\n');
    writeFileSync(join(root, 'etc/motd'), 'welcome\n');
    writeFileSync(
      join(root, 'var/lib/dpkg/status'),
      'Package: nginx\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1.22.1-9\nDescription: web server\n continued line\n\n' +
        'Package: curl\nStatus: install ok installed\nVersion: 7.88.1-10\n\nPackage: old\nStatus: deinstall ok config-files\nVersion: 1.0\n',
    );
    mkdirSync(join(root, 'etc/systemd/system/multi-user.target.wants'), { recursive: true });
    symlinkSync('/lib/systemd/system/nginx.service', join(root, 'etc/systemd/system/multi-user.target.wants/nginx.service'));
    const tokenFile = await token(fleet, 'web-1');
    expect((await host(root, 'state')).body).toMatchObject({ state: 'unmanaged' });
    const main = await git(fleet.checkout, 'rev-parse', 'HEAD');

    const before = snapshot(root);
    const enrolled = await host(root, 'enrol', '--token-file', tokenFile);
    expect(enrolled.code, enrolled.stderr).toBe(0);
    expect(enrolled.body).toMatchObject({ node: 'web-1', generation: 1, outcome: 'enrolled' });
    expect(snapshot(root)).toEqual(before);
    expect(existsSync(tokenFile)).toBe(false);

    const [first] = await reports(fleet, 'web-1');
    const r = first!.report;
    expect(r).toMatchObject({ kind: 'enrolment', outcome: 'enrolled', sequence: 1, previous: null, commit: main, generation: 1, errors: [], resources: [], owned: [] });
    expect(r.profile).toEqual({
      os: 'debian', osVersion: '12', osName: 'Debian GNU/Linux 12 (bookworm)', osCodename: 'bookworm', osFamily: 'debian', arch: expect.any(String), kernel: expect.any(String),
      cpus: expect.any(Number), memoryBytes: expect.any(Number), packageManager: 'dpkg', initSystem: 'unknown', hostVersion: expect.any(String),
    });
    expect(r.inventory).toEqual({ packages: { curl: '7.88.1-10', nginx: '1.22.1-9' }, services: ['nginx.service'], declaredPaths: [{ id: 'file:/etc/motd', kind: 'file' }] });
    expect(r.briefing.map((l: { check: string; ok: boolean }) => [l.check, l.ok])).toEqual([
      ['token unexpired', true],
      ['fleet reachable', true],
      ['clock within 5 minutes of the git server', true],
      ['package manager present', true],
      ['root writable', true],
      ['store recovered', true],
    ]);
    expect(r.briefing[5].detail).toBe('new store: reports/web-1 has no earlier report');

    const run = await host(root, 'run', '--once');
    expect(run.code, run.stderr).toBe(0);
    expect(readFileSync(join(root, 'etc/motd'), 'utf8')).toBe('managed\n');
    const all = await reports(fleet, 'web-1');
    expect(all.map((x) => [x.report.sequence, x.report.kind, x.report.outcome])).toEqual([[1, 'enrolment', 'enrolled'], [2, 'reconcile', 'applied']]);
    expect(all[1]!.report.previous).toBe(await sha256(all[0]!.text));
    expect((await host(root, 'state')).body).toMatchObject({ state: 'enrolled', node: 'web-1', generation: 1, eligible: true, unsentReport: false });
    // The facts its templates read, as facter shows Puppet's: the same the report carries.
    expect((await host(root, 'state')).body.facts).toEqual(all[1]!.report.facts);
    expect(all[1]!.report.facts).toMatchObject({ os: 'debian', osVersion: '12', osCodename: 'bookworm', osFamily: 'debian' });
    expect((await hostCmd(root, 'state')).stdout).toMatch(/^facts: hostname=\S+ os=debian osVersion=12 osCodename=bookworm osFamily=debian arch=\S+ cpus=\d+ memoryMb=\d+$/m);
  });

  it('rollback on a machine where mesh-host is no Debian package says so, rather than that no version completed a pass', async () => {
    const root = await fleet.enrol('roll-1');
    expect((await hostCmd(root, 'run', '--once')).code).toBe(0); // a pass completed, from a file, not from the package
    const r = await hostCmd(root, 'rollback');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('mesh-host is not installed as a Debian package on this machine, so there is no version to roll back to');
  });

  it('a node with no package manager is adopted but ineligible: it applies nothing, and every report says why', async () => {
    await fleet.commit({ 'nodes/db-1/base.yaml': 'resources:\n  - type: file\n    path: /etc/db.conf\n    content: "x\\n"\n' }, 'db-1');
    const root = newMachine(join(fleet.dir, 'machines', 'db-1'));
    const enrolled = await host(root, 'enrol', '--token-file', await token(fleet, 'db-1'));
    expect(enrolled.code, enrolled.stderr).toBe(1); // joined, but it will apply nothing
    expect(enrolled.body.outcome).toBe('ineligible');
    expect(enrolled.body.briefing.filter((l: { ok: boolean }) => !l.ok)).toEqual([
      { check: 'package manager present', ok: false, detail: `no dpkg database under ${root} (var/lib/dpkg/status is missing): mesh cannot manage packages here` },
    ]);
    const why = `ineligible: briefing check 'package manager present' failed: no dpkg database under ${root} (var/lib/dpkg/status is missing): mesh cannot manage packages here`;
    expect(await lastReport(fleet, 'db-1')).toMatchObject({ kind: 'enrolment', outcome: 'ineligible', errors: [{ code: 'E_INELIGIBLE', message: why }] });

    const before = snapshot(root);
    for (let pass = 0; pass < 2; pass++) {
      const run = await host(root, 'run', '--once');
      expect(run.code, run.stderr).toBe(1); // applied nothing: a script must not read it as done
      expect(run.body).toMatchObject({ outcome: 'ineligible', resources: [], owned: [] });
      expect(run.body.errors).toEqual([
        { code: 'E_INELIGIBLE', message: why },
        { code: 'E_NOT_ASSIGNABLE', message: 'nodes/db-1/ declares resources (base.yaml), but db-1 is ineligible: none are applied' },
      ]);
    }
    expect(snapshot(root)).toEqual(before);
    expect(await lastReport(fleet, 'db-1')).toMatchObject({ kind: 'reconcile', outcome: 'ineligible' });
    expect(await statusRow(fleet, 'db-1')).toMatchObject({ outcome: 'ineligible', signature: 'valid', errors: expect.arrayContaining([why]) });
    const state = (await host(root, 'state')).body;
    expect(state).toMatchObject({ state: 'enrolled', eligible: false });
    expect(state.reason).toContain('ineligible (applies only an empty declaration): package manager present: no dpkg database');
  });

  it('the clock line fails when the local clock is more than 5 minutes off the git server', async () => {
    const url = fleet.repoUrl;
    expect(await clockLine(fleetHttp(), url, () => new Date())).toMatchObject({ ok: true, detail: expect.stringMatching(/^local clock [+-]\ds from the server's/) });
    const skewed = await clockLine(fleetHttp(), url, () => new Date(Date.now() + 10 * 60_000));
    expect(skewed).toMatchObject({ ok: false, detail: expect.stringMatching(/^local clock \+60\ds from the server's .*: set the clock/) });
  });
});

describe('tokens', () => {
  let fleet: TestFleet;
  beforeAll(async () => {
    fleet = await createFleet();
  });
  afterAll(async () => fleet?.close());

  it('a token enrols one machine once: the same token is refused on another machine and on the same one', async () => {
    const file = await token(fleet, 'app-1');
    const copy = `${file}.copy`;
    copyFileSync(file, copy);
    const again = `${file}.again`;
    copyFileSync(file, again);
    const a = machine(fleet, 'app-1-a');
    expect((await hostCmd(a, 'enrol', '--token-file', file)).code).toBe(0);

    const b = machine(fleet, 'app-1-b');
    const other = await hostCmd(b, 'enrol', '--token-file', copy);
    expect(other.code).toBe(2);
    expect(other.stderr).toMatch(/^mesh-host: this token \(generation 1\) was already used: reports\/app-1 holds report #1 of generation 1, made at \S+Z\. A token enrols one machine once; issue a new one with 'mesh-cli token issue app-1'\n$/);
    expect(existsSync(join(b, 'etc/mesh-host/config.json'))).toBe(false);
    expect(existsSync(copy)).toBe(true);

    const same = await hostCmd(a, 'enrol', '--token-file', again);
    expect(same.code).toBe(2);
    expect(same.stderr).toContain('this machine is already enrolled as app-1 generation 1');
    expect((await reports(fleet, 'app-1')).length).toBe(1);
  });

  it('a token cut short or changed on its way is refused by its check, with nothing used; the whole token, or one without a check, enrols', async () => {
    const file = await token(fleet, 'app-9');
    const text = readFileSync(file, 'utf8');
    expect(text).toMatch(/^kind: mesh-token\nversion: 1\ncheck: "?[0-9a-f]{16}"?\n/m); // quoted when its digits read as a number
    const root = machine(fleet, 'app-9');
    // Cut before the credential (still a token the schema reads), and one field changed.
    const lines = text.split('\n');
    const cut = `${file}.cut`;
    writeFileSync(cut, `${lines.slice(0, lines.findIndex((l) => l.startsWith('credential:'))).join('\n')}\n`);
    const changed = `${file}.changed`;
    writeFileSync(changed, text.replace(/^mainBranch: main$/m, 'mainBranch: master'));
    for (const damaged of [cut, changed]) {
      const r = await hostCmd(root, 'enrol', '--token-file', damaged);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`the token file ${damaged} was cut short or changed on its way here (its check `);
      expect(r.stderr).toContain("nothing was used; copy the file 'mesh-cli token issue' wrote again, whole and unchanged, or issue a new token");
      expect(existsSync(join(root, 'etc/mesh-host/config.json'))).toBe(false);
    }
    expect(await git(fleet.checkout, 'ls-remote', 'origin', 'refs/heads/reports/app-9')).toBe(''); // no report: nothing used
    // CRLF line ends and an indent, as a mail or a clipboard may leave them, read the same: the check holds.
    const carried = `${file}.carried`;
    writeFileSync(carried, text.trimEnd().split('\n').map((l) => `  ${l}\r\n`).join(''));
    const whole = await hostCmd(root, 'enrol', '--token-file', carried);
    expect(whole.code, whole.stderr).toBe(0);

    // A token without a check, as mesh before it wrote them, enrols as before.
    const older = await token(fleet, 'app-10');
    writeFileSync(older, readFileSync(older, 'utf8').replace(/^check: .*\n/m, ''));
    const r = await hostCmd(machine(fleet, 'app-10'), 'enrol', '--token-file', older);
    expect(r.code, r.stderr).toBe(0);
  });

  it('an expired token is refused', async () => {
    const file = await token(fleet, 'app-2', { expires: '1s' });
    await sleep(1500);
    const r = await hostCmd(machine(fleet, 'app-2'), 'enrol', '--token-file', file);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^mesh-host: the token for app-2 expired at \S+Z: issue a new one with 'mesh-cli token issue app-2'\n$/);
  });

  it('a token of an older generation is refused, and one not pushed yet says to push it', async () => {
    const older = await token(fleet, 'app-3', { push: false });
    const newer = await token(fleet, 'app-3');
    const root = machine(fleet, 'app-3');
    const r = await hostCmd(root, 'enrol', '--token-file', older);
    expect(r.code).toBe(2);
    // The newer token replaced the node's git credential, so the server refuses the older one outright.
    expect(r.stderr).toContain("refused this token's git credential (app-3 generation 1, HTTP 401)");
    expect(r.stderr).toContain('a newer token was issued (or the node revoked) since, which revoked this one');

    const unpushed = await token(fleet, 'app-4', { push: false });
    const u = await hostCmd(machine(fleet, 'app-4'), 'enrol', '--token-file', unpushed);
    expect(u.code).toBe(2);
    expect(u.stderr).toContain('push the commit that issued the token (git push in the fleet checkout) and enrol again');
    expect((await hostCmd(root, 'enrol', '--token-file', newer)).code).toBe(0);
  });

  it("the token's secret is never written to the fleet repo or printed by the host", async () => {
    const file = await token(fleet, 'app-5');
    const secret = readFileSync(file, 'utf8').split('\n').find((l) => /^ +[A-Za-z0-9+/]{40,}/.test(l))!.trim();
    const enrolled = await hostCmd(machine(fleet, 'app-5'), 'enrol', '--token-file', file);
    expect(enrolled.code).toBe(0);
    await git(fleet.checkout, 'fetch', '--quiet', 'origin', '+refs/heads/reports/*:refs/remotes/origin/reports/*');
    const everything = (await runProgram('git', ['log', '-p', '--all'], fleet.checkout)).stdout;
    expect(everything).toContain('reports/app-5');
    expect(everything).not.toContain(secret);
    expect(enrolled.stdout + enrolled.stderr).not.toContain(secret);
  });

  it('token issue and revoke that cannot commit (the signing key not at hand) leave the checkout as it was, and run again as the first time would have', async () => {
    const key = (await git(fleet.checkout, 'config', 'user.signingkey')).trim();
    const before = await git(fleet.checkout, 'rev-parse', 'HEAD');
    const out = join(fleet.dir, 'app-6.token');
    await git(fleet.checkout, 'config', 'user.signingkey', join(fleet.dir, 'no-such-key'));
    try {
      const issued = await cli(fleet.checkout, 'token', 'issue', 'app-6', '--out', out);
      expect(issued.code).toBe(2);
      expect(issued.stderr).toContain('git commit --quiet failed');
      expect(existsSync(out)).toBe(false);
      expect(await git(fleet.checkout, 'status', '--porcelain')).toBe('');
      const revoked = await cli(fleet.checkout, 'revoke', 'app-5');
      expect(revoked.code).toBe(2);
      expect(await git(fleet.checkout, 'status', '--porcelain')).toBe('');
      expect(await git(fleet.checkout, 'rev-parse', 'HEAD')).toBe(before);
    } finally {
      await git(fleet.checkout, 'config', 'user.signingkey', key);
    }
    expect((await cli(fleet.checkout, 'token', 'issue', 'app-6', '--out', out)).code).toBe(0);
    expect(readFileSync(join(fleet.checkout, 'nodes/app-6/node.yaml'), 'utf8')).toMatch(/^generation: 1$/m);
    expect((await cli(fleet.checkout, 'revoke', 'app-5')).code).toBe(0);
    expect(readFileSync(join(fleet.checkout, 'nodes/app-5/node.yaml'), 'utf8')).toMatch(/^generation: 2$/m);
  });
});

describe('a host without its credential file', () => {
  let fleet: TestFleet;
  beforeAll(async () => {
    fleet = await createFleet();
  });
  afterAll(async () => fleet?.close());

  it('a credential file removed by hand is named as missing, not taken for a revocation; put back, the next pass goes on', async () => {
    const root = await fleet.enrol('web-8');
    expect((await hostCmd(root, 'run', '--once')).code).toBe(0);
    const file = join(root, 'etc/mesh-host/credential.json');
    const kept = readFileSync(file);
    rmSync(file);
    const before = snapshot(root);
    const run = await hostCmd(root, 'run', '--once');
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`the fleet server asks web-8 for its git credential (HTTP 401), and this machine has none: ${file} is missing`);
    expect(run.stderr).not.toContain('revoked');
    expect(snapshot(root)).toEqual(before);
    writeFileSync(file, kept, { mode: 0o600 });
    expect((await hostCmd(root, 'run', '--once')).code).toBe(0);
  });
});

describe('re-enrolment, retire and revoke', () => {
  let fleet: TestFleet;
  beforeAll(async () => {
    fleet = await createFleet();
  });
  afterAll(async () => fleet?.close());

  it("re-enrolment makes the old identity's reports revoked; the history of both stays readable and signers follows the new key", async () => {
    const root = await fleet.enrol('web-1');
    await fleet.commit({ 'nodes/web-1/base.yaml': 'resources:\n  - type: file\n    path: /etc/motd\n    content: "one\\n"\n' }, 'web-1');
    expect((await hostCmd(root, 'run', '--once')).code).toBe(0);
    expect(await statusRow(fleet, 'web-1')).toMatchObject({ signature: 'valid', outcome: 'applied' });

    const file = await token(fleet, 'web-1');
    expect(await statusRow(fleet, 'web-1')).toMatchObject({ signature: 'revoked', outcome: null, reason: 'signed by generation 1; node.yaml is at generation 2' });
    const before = snapshot(root);
    const stale = await hostCmd(root, 'run', '--once');
    expect(stale.code).toBe(2);
    expect(stale.stderr).toContain('the fleet server refused the git credential of web-1 (HTTP 401): its identity was revoked');
    expect(snapshot(root)).toEqual(before);

    expect((await hostCmd(root, 'enrol', '--token-file', file)).code).toBe(0);
    expect((await hostCmd(root, 'run', '--once')).code).toBe(0);
    expect(await statusRow(fleet, 'web-1')).toMatchObject({ signature: 'valid', outcome: 'applied', generation: 2 });

    const history = await reports(fleet, 'web-1');
    expect(history.map((h) => [h.report.sequence, h.report.generation, h.report.kind])).toEqual([[1, 1, 'enrolment'], [2, 1, 'reconcile'], [3, 2, 'enrolment'], [4, 2, 'reconcile']]);
    for (let i = 1; i < history.length; i++) expect(history[i]!.report.previous).toBe(await sha256(history[i - 1]!.text));
    expect(history[2]!.report.nodeKey).not.toBe(history[1]!.report.nodeKey);

    const signers = join(fleet.dir, 'allowed_signers');
    const written = await cli(fleet.checkout, 'signers', '--out', signers);
    expect(written.code, written.stderr).toBe(0);
    expect(readFileSync(signers, 'utf8')).toBe(`# allowed_signers of the fleet's current node identities, written by mesh-cli signers\nweb-1 ${history[3]!.report.nodeKey.split(' ').slice(0, 2).join(' ')}\n`);
    const verify = (rev: string) => gitIn(fleet.checkout, '-c', 'gpg.format=ssh', '-c', `gpg.ssh.allowedSignersFile=${signers}`, 'verify-commit', rev);
    expect((await verify('origin/reports/web-1')).code).toBe(0);
    expect((await verify(history[2]!.commit)).code).toBe(0);
    expect((await verify(history[1]!.commit)).code).not.toBe(0);
    const dir = tempDir('mesh-signers-');
    writeFileSync(join(dir, 'status.json'), history[3]!.text);
    writeFileSync(join(dir, 'status.json.sig'), (await runProgram('git', ['cat-file', 'blob', `${history[3]!.commit}:status.json.sig`], fleet.checkout)).stdout);
    const keygen = await runProgram('sh', ['-c', `ssh-keygen -Y verify -f ${signers} -I web-1 -n mesh-report -s status.json.sig < status.json`], dir);
    expect(keygen.code, keygen.stderr).toBe(0);
  });

  it('retire empties the machine of everything mesh owns and nothing else, and status shows it retired', async () => {
    const root = await fleet.enrol('old-1');
    writeFileSync(join(root, 'etc/motd'), 'welcome\n', { mode: 0o640 });
    writeFileSync(join(root, 'etc/hosts'), '127.0.0.1 localhost\n');
    mkdirSync(join(root, 'srv/data'));
    writeFileSync(join(root, 'srv/data/user.db'), 'the owner\'s data\n');
    const before = snapshot(root);
    await fleet.commit(
      {
        'nodes/old-1/base.yaml':
          'resources:\n  - type: directory\n    path: /srv/app\n  - type: file\n    path: /srv/app/app.ini\n    content: "port=1\\n"\n' +
          '  - type: file\n    path: /etc/motd\n    content: "managed\\n"\n    mode: "0644"\n  - type: directory\n    path: /srv/data\n    mode: "0700"\n',
      },
      'old-1',
    );
    expect((await hostCmd(root, 'run', '--once')).code).toBe(0);
    expect(snapshot(root)).not.toEqual(before);

    const retired = await cli(fleet.checkout, 'retire', 'old-1');
    expect(retired.code, retired.stderr).toBe(0);
    expect(retired.stdout).toMatch(/^retired old-1: committed [0-9a-f]{12} \(removed nodes\/old-1\/base\.yaml\)\n/);
    expect(readFileSync(join(fleet.checkout, 'nodes/old-1/node.yaml'), 'utf8')).toContain('retired: true');
    await git(fleet.checkout, 'push', '--quiet');

    const run = await host(root, 'run', '--once');
    expect(run.code, run.stderr).toBe(0);
    expect(snapshot(root)).toEqual(before);
    expect(run.body).toMatchObject({ outcome: 'retired', owned: [], errors: [] });
    expect(run.body.resources.map((r: { id: string; result: string }) => `${r.result} ${r.id}`)).toEqual([
      'restored directory:/srv/data',
      'restored file:/etc/motd',
      'removed file:/srv/app/app.ini',
      'removed directory:/srv/app',
    ]);
    expect(await statusRow(fleet, 'old-1')).toMatchObject({ outcome: 'retired', signature: 'valid' });
    expect((await host(root, 'state')).body).toMatchObject({ state: 'enrolled', owned: [] });
  });

  it('revoke bumps the generation without a token, names the credentials to revoke, and stops the old host', async () => {
    const root = join(fleet.dir, 'machines', 'old-1');
    const key = (await lastReport(fleet, 'old-1')).nodeKey.split(' ').slice(0, 2).join(' ');
    const revoked = await cli(fleet.checkout, 'revoke', 'old-1');
    expect(revoked.code, revoked.stderr).toBe(0);
    const lines = revoked.stdout.split('\n');
    expect(lines[0]).toMatch(/^revoked old-1: generation 2 \(no token\) committed as [0-9a-f]{12}; push it \(git push\) to make it take effect$/);
    expect(lines[1]).toBe('then revoke these per-node credentials; mesh can revoke only the first, and only on its own server:');
    expect(lines[2]).toBe(`  - the git credential old-1 pushes its reports with (refs/heads/reports/old-1 at ${fleet.plainUrl}; on the machine in /etc/mesh-host/credential.json): mesh-cli serve refuses it at once, as soon as this commit is pushed; on any other git server, delete it there`);
    expect(lines[3]).toContain(`the node key SHA256:`);
    expect(lines[3]).toContain(key);
    expect(lines[4]).toMatch(/every secret a declaration gave old-1/);
    const identity = readFileSync(join(fleet.checkout, 'nodes/old-1/node.yaml'), 'utf8');
    expect(identity).toMatch(/^generation: 2$/m);
    expect(identity).not.toMatch(/^token:/m);
    expect(identity).toMatch(/^previous:\n {2}- generation: 1\n {4}publicKey: ssh-ed25519 /m);
    await git(fleet.checkout, 'push', '--quiet');

    expect(await statusRow(fleet, 'old-1')).toMatchObject({ signature: 'revoked', outcome: null, lastContact: expect.stringMatching(/^\d{4}-/) }); // its last contact is kept
    const stale = await hostCmd(root, 'run', '--once');
    expect(stale.code).toBe(2);
    expect(stale.stderr).toContain('its identity was revoked, so it applies and reports nothing more');
    const signers = await cli(fleet.checkout, 'signers');
    expect(signers.stdout).not.toContain(key);
    expect(signers.stderr).toContain('old-1: left out, last report is revoked');
  });
});

describe('store loss', () => {
  let fleet: TestFleet;
  beforeAll(async () => {
    fleet = await createFleet();
  });
  afterAll(async () => fleet?.close());

  it('a deleted store stops the host; re-enrolment recovers the owned set, and un-declaring a resource still removes it', async () => {
    const root = await fleet.enrol('st-1');
    writeFileSync(join(root, 'etc/pre.conf'), 'original\n');
    await fleet.commit(
      {
        'nodes/st-1/base.yaml':
          'resources:\n  - type: file\n    path: /etc/made.conf\n    content: "made\\n"\n  - type: file\n    path: /etc/pre.conf\n    content: "managed\\n"\n  - type: directory\n    path: /srv/made\n',
      },
      'st-1',
    );
    expect((await hostCmd(root, 'run', '--once')).code).toBe(0);
    rmSync(join(root, 'var/lib/mesh-host/store.json'));

    const before = snapshot(root);
    const refused = await hostCmd(root, 'run', '--once');
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`the store ${root}/var/lib/mesh-host/store.json is missing, but this machine is enrolled as st-1: mesh-host will not start from an empty store`);
    expect(snapshot(root)).toEqual(before);
    expect((await host(root, 'state')).body.reason).toContain('is missing: the host applies nothing until it re-enrols');

    const enrolled = await host(root, 'enrol', '--token-file', await token(fleet, 'st-1'));
    expect(enrolled.code, enrolled.stderr).toBe(0);
    const line = enrolled.body.briefing.find((l: { check: string }) => l.check === 'store recovered');
    expect(line).toEqual({
      check: 'store recovered',
      ok: true,
      detail: expect.stringMatching(
        /^recovered 3 records from report #2 \(generation 1, \S+Z\); 1 existed before mesh took them over and the report holds no copy of them, so un-declaring them will leave them as they are$/,
      ),
    });
    expect((await lastReport(fleet, 'st-1')).owned.map((o: { id: string }) => o.id)).toEqual(['file:/etc/made.conf', 'file:/etc/pre.conf', 'directory:/srv/made']);

    await fleet.commit({ 'nodes/st-1/base.yaml': 'resources:\n  - type: directory\n    path: /srv/made\n' }, 'st-1: less');
    const run = await host(root, 'run', '--once');
    expect(run.code, run.stderr).toBe(0);
    expect(existsSync(join(root, 'etc/made.conf'))).toBe(false);
    expect(readFileSync(join(root, 'etc/pre.conf'), 'utf8')).toBe('managed\n');
    expect(run.body.resources).toEqual([
      { id: 'directory:/srv/made', result: 'unchanged' },
      { id: 'file:/etc/made.conf', result: 'removed' },
      { id: 'file:/etc/pre.conf', result: 'released', changes: ['left as it is: it existed before mesh took it over, and the store it was recovered from held no copy of what was there'] },
    ]);
    expect(run.body.owned.map((o: { id: string }) => o.id)).toEqual(['directory:/srv/made']);
  });

  it('a lost or damaged node key or config stops the host with the file and what to do, not as a bug, and changes nothing', async () => {
    const root = await fleet.enrol('st-4');
    await fleet.commit({ 'nodes/st-4/base.yaml': 'resources:\n  - type: file\n    path: /etc/kept.conf\n    content: "kept\\n"\n' }, 'st-4');
    expect((await hostCmd(root, 'run', '--once')).code).toBe(0);
    await fleet.commit({ 'nodes/st-4/base.yaml': 'resources:\n  - type: file\n    path: /etc/kept.conf\n    content: "changed\\n"\n' }, 'st-4: changed');
    const todo = "mesh-host wrote it at enrolment and does not change it since: restore it from a backup, or move it away and enrol again ('mesh-cli token issue NODE', then 'mesh-host enrol --token-file F'). Until then this machine applies nothing and keeps what it has";
    const keyFile = join(root, 'etc/mesh-host/node.key');
    const configFile = join(root, 'etc/mesh-host/config.json');
    const key = readFileSync(keyFile, 'utf8');
    const config = readFileSync(configFile, 'utf8');
    const before = snapshot(root);

    rmSync(keyFile);
    const lost = await hostCmd(root, 'run', '--once');
    expect(lost.code).toBe(2);
    expect(lost.stderr).toBe(`mesh-host: the node key ${keyFile} cannot be read (ENOENT): ${todo}\n`);
    writeFileSync(keyFile, 'not a key\n');
    const damaged = await hostCmd(root, 'run', '--once');
    expect(damaged.code).toBe(2);
    expect(damaged.stderr).toContain(`mesh-host: the node key ${keyFile} is not one mesh-host wrote (`);
    expect(damaged.stderr).toContain(todo);
    writeFileSync(keyFile, key, { mode: 0o600 });

    writeFileSync(configFile, config.slice(0, 100));
    const cut = await hostCmd(root, 'run', '--once');
    expect(cut.code).toBe(2);
    expect(cut.stderr).toMatch(new RegExp(`^mesh-host: the host config ${configFile} is invalid:\n  ${configFile}:\\d+:\\d+: .+\n`));
    expect(cut.stderr).toContain(`\n${todo}\n`);
    writeFileSync(configFile, config);

    expect(snapshot(root)).toEqual(before);
    expect(readFileSync(join(root, 'etc/kept.conf'), 'utf8')).toBe('kept\n');
    expect((await hostCmd(root, 'run', '--once')).code).toBe(0);
    expect(readFileSync(join(root, 'etc/kept.conf'), 'utf8')).toBe('changed\n');
  });

  it('a rebuilt machine, re-enrolled without the node key of its last report, starts owning nothing: what it makes is no drift, and un-declaring gives back its own file', async () => {
    const old = await fleet.enrol('st-3');
    await fleet.commit({ 'nodes/st-3/base.yaml': 'resources:\n  - type: file\n    path: /etc/app.conf\n    content: "app\\n"\n  - type: file\n    path: /etc/motd\n    content: "fleet\\n"\n' }, 'st-3');
    expect((await hostCmd(old, 'run', '--once')).code).toBe(0);
    expect((await lastReport(fleet, 'st-3')).owned.map((o: { id: string; prior: unknown }) => [o.id, o.prior])).toEqual([['file:/etc/app.conf', { existed: false }], ['file:/etc/motd', { existed: false }]]);

    // The machine is rebuilt: a new disk with the distribution's own /etc/motd, none of mesh's files, and the same name.
    const rebuilt = machine(fleet, 'st-3-rebuilt');
    writeFileSync(join(rebuilt, 'etc/motd'), 'welcome to debian\n');
    const enrolled = await host(rebuilt, 'enrol', '--token-file', await token(fleet, 'st-3'));
    expect(enrolled.code, enrolled.stderr).toBe(0);
    expect(enrolled.body.briefing.find((l: { check: string }) => l.check === 'store recovered')).toEqual({
      check: 'store recovered',
      ok: true,
      detail: 'new store: report #2 on reports/st-3 was signed with a node key this machine does not hold, so another machine made it (this one was rebuilt, or is new): nothing it lists is here, and this machine starts owning nothing',
    });
    const first = await host(rebuilt, 'run', '--once');
    expect(first.code, first.stderr).toBe(0);
    // Neither line says drift: nothing here was mesh's to drift.
    expect(first.body.resources).toEqual([
      { id: 'file:/etc/app.conf', result: 'created', changes: ['absent, should be a file'] },
      { id: 'file:/etc/motd', result: 'updated', changes: ['content differs'] },
    ]);

    await fleet.commit({ 'nodes/st-3/base.yaml': 'resources:\n  - type: file\n    path: /etc/app.conf\n    content: "app\\n"\n' }, 'st-3: no motd');
    const less = await host(rebuilt, 'run', '--once');
    expect(less.code, less.stderr).toBe(0);
    expect(less.body.resources).toEqual([
      { id: 'file:/etc/app.conf', result: 'unchanged' },
      { id: 'file:/etc/motd', result: 'restored', changes: ['restored /etc/motd to what was there before mesh took it over'] },
    ]);
    expect(readFileSync(join(rebuilt, 'etc/motd'), 'utf8')).toBe('welcome to debian\n');
  });

  it('a report branch that does not verify makes a re-enrolled machine ineligible and says how to start afresh; deleting the branch does', async () => {
    await fleet.enrol('st-2');
    // The branch is blanked with a commit that is no report (here with the operator's credential; the node's, which its token holds, can too).
    const blank = tempDir('mesh-blank-');
    await git(blank, 'init', '--quiet');
    await git(blank, '-c', 'user.name=x', '-c', 'user.email=x@x', 'commit', '--quiet', '--allow-empty', '-m', 'blank');
    await git(blank, 'push', '--quiet', '--force', fleet.repoUrl, 'HEAD:refs/heads/reports/st-2');
    const fresh = machine(fleet, 'st-2-new');
    const ineligible = await host(fresh, 'enrol', '--token-file', await token(fleet, 'st-2'));
    expect(ineligible.code).toBe(1);
    const line = ineligible.body.briefing.find((l: { check: string }) => l.check === 'store recovered');
    expect(line).toMatchObject({ ok: false, detail: expect.stringContaining("delete that branch as the operator ('git push origin --delete reports/st-2'), then issue a new token and enrol again") });

    await git(fleet.checkout, 'push', '--quiet', 'origin', '--delete', 'reports/st-2');
    const again = await host(machine(fleet, 'st-2-again'), 'enrol', '--token-file', await token(fleet, 'st-2'));
    expect(again.code, again.stderr).toBe(0);
    expect(again.body.briefing.find((l: { check: string }) => l.check === 'store recovered')).toMatchObject({ ok: true, detail: 'new store: reports/st-2 has no earlier report' });
  });
});

describe('disconnected', () => {
  it('with the server stopped the host keeps correcting drift, and pushes its backlog once the server is back', async () => {
    const fleet = await createFleet();
    try {
      const root = await fleet.enrol('dc-1');
      const commit = await fleet.commit({ 'nodes/dc-1/base.yaml': 'resources:\n  - type: file\n    path: /etc/app.conf\n    content: "v1\\n"\n' }, 'dc-1');
      expect((await hostCmd(root, 'run', '--once')).code).toBe(0);
      const port = new URL(fleet.server.url).port;
      await fleet.server.stop();

      writeFileSync(join(root, 'etc/app.conf'), 'tampered\n');
      const down = await host(root, 'run', '--once');
      expect(down.code).toBe(3); // DESIGN.md's table: the pass applied, the fleet is unreachable: try again later
      expect(down.body).toMatchObject({ outcome: 'applied', commit, delivery: 'kept', sent: false, disconnected: expect.stringMatching(/^cannot poll the fleet repo at /) });
      expect(readFileSync(join(root, 'etc/app.conf'), 'utf8')).toBe('v1\n');
      const state = (await host(root, 'state')).body;
      expect(state).toMatchObject({ state: 'disconnected', unsentReport: true });
      expect(state.reason).toMatch(/^last successful contact with the fleet at \S+Z; error at \S+Z: cannot poll the fleet repo at .*; reconciling the last fetched declaration; a report is waiting to be pushed$/);

      fleet.server = await startServer(fleet.server.data, Number(port));
      const up = await host(root, 'run', '--once');
      expect(up.code, up.stderr).toBe(0);
      expect((await host(root, 'state')).body).toMatchObject({ state: 'enrolled', unsentReport: false });
      const history = await reports(fleet, 'dc-1');
      const offline = history.find((h) => h.report.sequence === down.body.sequence)!;
      expect(offline.report.resources).toEqual([{ id: 'file:/etc/app.conf', result: 'updated', changes: ['content differs'], drift: true }]);
      expect(history.at(-1)!.report.sequence).toBe(up.body.sequence);
      for (let i = 1; i < history.length; i++) expect(history[i]!.report.previous).toBe(await sha256(history[i - 1]!.text));
    } finally {
      await fleet.close();
    }
  });
});

describe('the first node', () => {
  it('a hosted machine applies a local bundle, then enrols and keeps what the bundle gave it', async () => {
    const fleet = await createFleet();
    try {
      const root = machine(fleet, 'first');
      expect((await host(root, 'state')).body).toMatchObject({ state: 'unmanaged' });
      const bundle = join(fleet.dir, 'bundle');
      mkdirSync(bundle);
      const base = 'resources:\n  - type: directory\n    path: /srv/git\n  - type: file\n    path: /etc/mesh-serve.conf\n    content: "data=/srv/git\\n"\n';
      writeFileSync(join(bundle, 'base.yaml'), base);
      const applied = await host(root, 'apply', '--bundle', bundle);
      expect(applied.code, applied.stderr).toBe(0);
      expect(applied.body).toMatchObject({ outcome: 'applied', commit: null });
      expect(readFileSync(join(root, 'etc/mesh-serve.conf'), 'utf8')).toBe('data=/srv/git\n');
      const hosted = (await host(root, 'state')).body;
      expect(hosted).toMatchObject({ state: 'hosted', owned: [{ id: 'directory:/srv/git' }, { id: 'file:/etc/mesh-serve.conf' }] });

      await fleet.commit({ 'nodes/first/base.yaml': base }, 'first: what its bundle applied');
      const enrolled = await host(root, 'enrol', '--token-file', await token(fleet, 'first'));
      expect(enrolled.code, enrolled.stderr).toBe(0);
      expect(enrolled.body.briefing.find((l: { check: string }) => l.check === 'store recovered').detail).toBe('kept the existing store (2 records)');
      expect((await host(root, 'state')).body).toMatchObject({ state: 'enrolled', node: 'first' });
      const run = await host(root, 'run', '--once');
      expect(run.code, run.stderr).toBe(0);
      expect(run.body.resources.map((r: { result: string }) => r.result)).toEqual(['unchanged', 'unchanged']);
      expect(run.body.owned.map((o: { id: string }) => o.id)).toEqual(['directory:/srv/git', 'file:/etc/mesh-serve.conf']);
    } finally {
      await fleet.close();
    }
  });
});

describe('state', () => {
  /** The owned lines that `mesh-host state` prints. */
  const ownedLines = async (root: string) => {
    const r = await hostCmd(root, 'state');
    expect(r.code, r.stderr).toBe(0);
    return r.stdout.slice(r.stdout.indexOf('owned (')).trimEnd().split('\n');
  };
  /** One pass that kills itself at `fault` (MESH_FAULT, agent/fault.ts); resolves with how it ended. */
  const killedPass = (root: string, fault: string) =>
    new Promise<{ signal: string | null; stderr: string }>((resolve) => {
      const proc = spawn('node', [MESH_HOST, 'run', '--once', '--root', root], { env: { ...process.env, MESH_LOG_LEVEL: 'warn', MESH_FAULT: fault }, stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      proc.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
      proc.on('close', (_code, signal) => resolve({ signal, stderr }));
    });
  const file = (path: string, content: string) => `  - type: file\n    path: ${path}\n    content: "${content}\\n"\n`;

  it('a change skipped because what it needs failed is shown with why, once', async () => {
    const fleet = await createFleet();
    try {
      const root = await fleet.enrol('sk-1');
      await fleet.commit({ 'nodes/sk-1/base.yaml': `resources:\n  - type: directory\n    path: /data/app\n${file('/data/app/app.conf', 'app')}` }, 'sk-1');
      const failed = await host(root, 'run', '--once');
      expect(failed.code).toBe(1);
      const error = 'not applied, because what it needs did not apply in this pass: directory:/data/app failed; the next pass tries again';
      expect(failed.body.resources.map((l: { id: string; result: string }) => `${l.id} ${l.result}`)).toEqual(['directory:/data/app failed', 'file:/data/app/app.conf skipped']);
      expect((await ownedLines(root)).at(-1)).toBe(`  file:/data/app/app.conf (last change failed: ${error})`);
      expect((await host(root, 'state')).body.owned.at(-1)).toEqual({ id: 'file:/data/app/app.conf', state: 'intent', at: expect.any(String), error });
    } finally {
      await fleet.close();
    }
  });

  it('a change that failed is shown as failed with its error; only a change a killed host left is shown as in progress when it stopped', async () => {
    const fleet = await createFleet();
    try {
      const root = await fleet.enrol('sf-1');
      await fleet.commit({ 'nodes/sf-1/base.yaml': `resources:\n${file('/etc/motd', 'one')}${file('/srv/missing/app.conf', 'app')}` }, 'sf-1');
      const error = 'the parent directory of /srv/missing/app.conf does not exist: declare it as a directory resource';
      const failed = await host(root, 'run', '--once');
      expect(failed.code).toBe(1);
      expect(failed.body.resources).toEqual([
        { id: 'file:/etc/motd', result: 'created', changes: ['absent, should be a file'] },
        { id: 'file:/srv/missing/app.conf', result: 'failed', changes: ['absent, should be a file'], error },
      ]);
      const failedLine = `  file:/srv/missing/app.conf (last change failed: ${error}; it is retried on the next pass)`;
      expect(await ownedLines(root)).toEqual(['owned (2):', '  file:/etc/motd', failedLine]);
      expect((await host(root, 'state')).body.owned).toEqual([
        { id: 'file:/etc/motd', state: 'verified', at: expect.any(String) },
        { id: 'file:/srv/missing/app.conf', state: 'intent', at: expect.any(String), error },
      ]);

      // Killed between the intent of /etc/motd's change and the change: its last report line is 'created', not a failure.
      await fleet.commit({ 'nodes/sf-1/base.yaml': `resources:\n${file('/etc/motd', 'two')}${file('/srv/missing/app.conf', 'app')}` }, 'sf-1: motd two');
      const killed = await killedPass(root, 'after-intent:1');
      expect(killed.signal, killed.stderr).toBe('SIGKILL');
      expect(readFileSync(join(root, 'etc/motd'), 'utf8')).toBe('one\n');
      expect(await ownedLines(root)).toEqual(['owned (2):', '  file:/etc/motd (change in progress when the host stopped)', failedLine]);
      expect((await host(root, 'state')).body.owned).toEqual([
        { id: 'file:/etc/motd', state: 'intent', at: expect.any(String) },
        { id: 'file:/srv/missing/app.conf', state: 'intent', at: expect.any(String), error },
      ]);
    } finally {
      await fleet.close();
    }
  });
});
