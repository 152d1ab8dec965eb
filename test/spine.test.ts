/**
 * The spine, end to end: a commit on main becomes applied resources on simulated machines
 * and verified, signed reports that `mesh-cli status` reads. Real git http-backend, real
 * git binary, real ssh-keygen; the built mesh-cli and mesh-host run as processes.
 */
import { readFileSync, statSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKeyPair, signSsh, sshPublicKey } from '../core/sign/sshsig.js';
import { cli, createFleet, git, gitIn, hostCmd, runProgram, startServer, type TestFleet } from './helpers/fleet.js';
import { snapshot } from './helpers/snapshot.js';
import { tempDirs } from './helpers/tmp.js';

const tempDir = tempDirs();

const webBase = `resources:
  - type: directory
    path: /srv/app
    mode: "0750"
  - type: file
    path: /etc/motd
    content: "managed by mesh\\n"
    mode: "0644"
  - type: file
    path: /srv/app/config.ini
    content: "port=8080\\n"
    mode: "0600"
`;

interface StatusRow {
  node: string;
  commit: string | null;
  outcome: string | null;
  signature: string;
  hostVersion: string | null;
  lastContact: string | null;
  reason?: string;
}

async function status(fleet: TestFleet): Promise<Map<string, StatusRow>> {
  const r = await cli(fleet.checkout, 'status', '--json');
  expect(r.stderr).toBe('');
  expect([0, 1, 4]).toContain(r.code); // the fleet's state by the exit table; never 2, 3 or 70
  return new Map((JSON.parse(r.stdout) as { nodes: StatusRow[] }).nodes.map((n) => [n.node, n]));
}

async function lastReport(fleet: TestFleet, node: string) {
  await git(fleet.checkout, 'fetch', '--quiet', 'origin', '+refs/heads/reports/*:refs/remotes/origin/reports/*');
  return JSON.parse(await git(fleet.checkout, 'show', `origin/reports/${node}:status.json`));
}

describe('the spine', () => {
  let fleet: TestFleet;
  let web1: string;
  let web2: string;
  let applied: string;

  beforeAll(async () => {
    fleet = await createFleet();
    web1 = await fleet.enrol('web-1');
    web2 = await fleet.enrol('web-2');
  });
  afterAll(async () => fleet?.close());

  it('a commit gives two nodes files and a directory, and status shows both applied with valid signatures', async () => {
    applied = await fleet.commit({ 'nodes/web-1/base.yaml': webBase, 'nodes/web-2/base.yaml': webBase }, 'web: base');
    for (const root of [web1, web2]) {
      const run = await hostCmd(root, 'run', '--once');
      expect(run.code, run.stdout + run.stderr).toBe(0);
      expect(readFileSync(join(root, 'etc/motd'), 'utf8')).toBe('managed by mesh\n');
      expect(statSync(join(root, 'etc/motd')).mode & 0o7777).toBe(0o644);
      expect(readFileSync(join(root, 'srv/app/config.ini'), 'utf8')).toBe('port=8080\n');
      expect(statSync(join(root, 'srv/app/config.ini')).mode & 0o7777).toBe(0o600);
      expect(statSync(join(root, 'srv/app')).isDirectory()).toBe(true);
      expect(statSync(join(root, 'srv/app')).mode & 0o7777).toBe(0o750);
    }
    const rows = await status(fleet);
    for (const node of ['web-1', 'web-2']) {
      expect(rows.get(node)).toMatchObject({ node, commit: applied, outcome: 'applied', signature: 'valid', hostVersion: expect.any(String) });
    }
  });

  it('un-declaring a file removes it from that node only, and the report says so', async () => {
    const before2 = snapshot(web2);
    const next = await fleet.commit({ 'nodes/web-1/base.yaml': webBase.replace(/  - type: file\n    path: \/etc\/motd\n.*\n.*\n/, '') }, 'web-1: no motd');
    for (const root of [web1, web2]) expect((await hostCmd(root, 'run', '--once')).code).toBe(0);
    expect(existsSync(join(web1, 'etc/motd'))).toBe(false);
    expect(readFileSync(join(web1, 'srv/app/config.ini'), 'utf8')).toBe('port=8080\n');
    expect(snapshot(web2)).toEqual(before2);
    const report = await lastReport(fleet, 'web-1');
    expect(report.commit).toBe(next);
    expect(report.resources).toContainEqual({ id: 'file:/etc/motd', result: 'removed' });
    expect(report.owned.map((o: { id: string }) => o.id)).toEqual(['directory:/srv/app', 'file:/srv/app/config.ini']);
    const rows = await status(fleet);
    expect(rows.get('web-1')).toMatchObject({ commit: next, outcome: 'applied', signature: 'valid' });
    expect(rows.get('web-2')).toMatchObject({ commit: next, outcome: 'applied', signature: 'valid' });
  });

  it('ssh-keygen accepts the status signature and git verify-commit accepts the report commit, and both reject tampering', async () => {
    const dir = tempDir('mesh-verify-');
    const report = await lastReport(fleet, 'web-2');
    writeFileSync(join(dir, 'status.json'), await git(fleet.checkout, 'show', 'origin/reports/web-2:status.json') + '\n');
    writeFileSync(join(dir, 'status.json.sig'), await git(fleet.checkout, 'show', 'origin/reports/web-2:status.json.sig') + '\n');
    writeFileSync(join(dir, 'allowed_signers'), `web-2 ${report.nodeKey}\n`);
    const verify = (file: string) => runProgram('sh', ['-c', `ssh-keygen -Y verify -f allowed_signers -I web-2 -n mesh-report -s status.json.sig < ${file}`], dir);
    expect((await verify('status.json')).code).toBe(0);
    writeFileSync(join(dir, 'tampered.json'), readFileSync(join(dir, 'status.json'), 'utf8').replace(/"sequence": \d+/, '"sequence": 999'));
    expect((await verify('tampered.json')).code).not.toBe(0);

    const verifyCommit = (rev: string) => gitIn(fleet.checkout, '-c', 'gpg.format=ssh', '-c', `gpg.ssh.allowedSignersFile=${join(dir, 'allowed_signers')}`, 'verify-commit', rev);
    expect((await verifyCommit('origin/reports/web-2')).code).toBe(0);
    const raw = await git(fleet.checkout, 'cat-file', 'commit', 'origin/reports/web-2');
    writeFileSync(join(dir, 'commit'), raw.replace(/\n\nreport web-2/, '\n\nreport web-2 (edited)') + '\n');
    const forged = await git(fleet.checkout, 'hash-object', '-t', 'commit', '-w', join(dir, 'commit'));
    expect((await verifyCommit(forged)).code).not.toBe(0);
  });

  it('a report edited by hand and pushed again shows invalid, never applied', async () => {
    const work = join(fleet.dir, 'forge');
    await git(fleet.dir, 'clone', '--quiet', '--branch', 'reports/web-1', fleet.repoUrl, work);
    const forge = async (files: Record<string, string | null>, node: string) => {
      for (const [f, text] of Object.entries(files)) {
        if (text === null) await git(work, 'rm', '--quiet', f);
        else writeFileSync(join(work, f), text);
      }
      await git(work, '-c', 'user.name=x', '-c', 'user.email=x@x', 'commit', '--quiet', '-am', 'edited');
      await git(work, 'push', '--quiet', 'origin', `HEAD:refs/heads/reports/${node}`);
      return (await status(fleet)).get(node)!;
    };
    const original = JSON.parse(readFileSync(join(work, 'status.json'), 'utf8'));
    // Claim a commit the node never applied, signed with a key of the forger's own.
    const mallory = generateKeyPair();
    const edited = JSON.stringify({ ...original, commit: applied, nodeKey: sshPublicKey(mallory.publicKey) }, null, 2) + '\n';
    const resigned = await forge({ 'status.json': edited, 'status.json.sig': signSsh(edited, mallory.privateKey, 'mesh-report') }, 'web-1');
    expect(resigned).toMatchObject({ signature: 'invalid', reason: expect.stringContaining('not vouched for') });
    expect(resigned).toMatchObject({ outcome: null, commit: null, claimed: { outcome: 'applied', commit: applied } });
    // Same edit, keeping the node's own key and old signature.
    const kept = JSON.stringify({ ...original, outcome: 'applied', commit: applied }, null, 2) + '\n';
    expect(await forge({ 'status.json': kept, 'status.json.sig': readFileSync(join(work, 'status.json.sig'), 'utf8') }, 'web-1')).toMatchObject({ signature: 'invalid' });
    // Unsigned.
    expect(await forge({ 'status.json.sig': null }, 'web-1')).toMatchObject({ signature: 'invalid', reason: expect.stringContaining('not signed') });
    const table = await cli(fleet.checkout, 'status');
    expect(table.stdout).toMatch(/^web-1 +unknown +- +\(claims applied, unverified\) +- +invalid$/m);
  });
});

describe('bad declarations apply nothing', () => {
  let fleet: TestFleet;
  let root: string;

  beforeAll(async () => {
    fleet = await createFleet();
    root = await fleet.enrol('db-1');
    await fleet.commit({ 'nodes/db-1/base.yaml': 'resources:\n  - type: file\n    path: /etc/issue\n    content: "db\\n"\n' }, 'db-1 base');
    expect((await hostCmd(root, 'run', '--once')).code).toBe(0);
  });
  afterAll(async () => fleet?.close());

  const cases: Array<[string, string, RegExp]> = [
    ['a YAML syntax error', 'resources:\n  - type: file\n    path: "/etc/new\n', /^nodes\/db-1\/base\.yaml:3:\d+: /],
    ['an unknown field', 'resources:\n  - type: file\n    path: /etc/new\n    colour: red\n', /^nodes\/db-1\/base\.yaml:4:5: .*unknown field 'colour'/],
    ['a duplicate key', 'resources:\n  - type: file\n    path: /etc/new\n    path: /etc/other\n', /^nodes\/db-1\/base\.yaml:4:5: duplicate key/],
  ];
  it.each(cases)('%s gives a failed report naming file:line:column and leaves the root as it was', async (_name, yaml, where) => {
    const before = snapshot(root);
    const commit = await fleet.commit({ 'nodes/db-1/base.yaml': yaml.replace('/etc/new', '/etc/new').concat('  - type: file\n    path: /etc/issue\n    content: "changed\\n"\n') }, 'broken');
    const run = await hostCmd(root, 'run', '--once', '--json');
    expect(run.code).toBe(1);
    const report = JSON.parse(run.stdout);
    // Nothing of the broken commit is applied; the last good declaration is still enforced (and in sync).
    expect(report).toMatchObject({ outcome: 'failed', commit, resources: [{ id: 'file:/etc/issue', result: 'unchanged' }] });
    expect(report.errors.at(-1)).toMatchObject({ code: 'E_KEPT_LAST_GOOD' });
    const errors = report.errors.map((e: { file: string; line: number; col: number; message: string }) => `${e.file}:${e.line}:${e.col}: ${e.message}`);
    expect(errors.some((e: string) => where.test(e)), errors.join('\n')).toBe(true);
    expect(snapshot(root)).toEqual(before);
    const row = JSON.parse((await cli(fleet.checkout, 'status', '--json')).stdout).nodes[0];
    expect(row).toMatchObject({ node: 'db-1', commit, outcome: 'failed', signature: 'valid' });
  });
});

describe('the server is down', () => {
  it('a run fails with a clear message while the server is down and the next run succeeds', async () => {
    const fleet = await createFleet();
    try {
      const root = await fleet.enrol('app-1');
      const commit = await fleet.commit({ 'nodes/app-1/base.yaml': 'resources:\n  - type: file\n    path: /etc/app\n    content: "1\\n"\n' }, 'app');
      const port = new URL(fleet.server.url).port;
      expect((await cli(fleet.checkout, 'status')).stdout).toMatch(/^app-1 /m); // its report index: what the next run shows when the server is down
      await fleet.server.stop();
      // status shows the nodes as its last run saw them, names the server that did not answer, and exits 3 (try again later).
      const seen = await cli(fleet.checkout, 'status');
      expect(seen.code).toBe(3);
      expect(seen.stdout).toMatch(/^app-1 +\S+ \(\S+ ago\) +[0-9a-f]{12} +enrolled /m);
      expect(seen.stderr).toMatch(/^mesh-cli: the fleet server http:\/\/127\.0\.0\.1:\d+\/fleet\.git did not answer \(.*\): its 1 node\(s\) are shown as the last status run saw them; try again later$/m);
      const down = await hostCmd(root, 'run', '--once');
      expect(down.code).toBe(3);
      expect(down.stderr).toMatch(/cannot poll the fleet repo at http:\/\/127\.0\.0\.1:\d+\/fleet\.git/);
      expect(existsSync(join(root, 'etc/app'))).toBe(false);
      fleet.server = await startServer(fleet.server.data, Number(port));
      const up = await hostCmd(root, 'run', '--once');
      expect(up.code, up.stdout + up.stderr).toBe(0);
      expect(readFileSync(join(root, 'etc/app'), 'utf8')).toBe('1\n');
      expect((await lastReport(fleet, 'app-1')).commit).toBe(commit);
    } finally {
      await fleet.close();
    }
  });
});
