/**
 * `mesh-cli hook` as git runs it in a bare repository that no mesh server serves: pushes made
 * with the real git into a repository whose pre-receive, update and post-receive hooks call
 * the built mesh-cli, the pusher named by REMOTE_USER (as a web server names it). The same
 * rules as `mesh-cli serve`: an operator everything but deleting main, a node its own report
 * branch only, capped, a token enrolling once; identities only from the trusted main; the
 * password file follows revoke.
 */
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { cli, git, MESH_CLI, runProgram, signingKey } from './helpers/fleet.js';
import { tempDirs } from './helpers/tmp.js';

const tmp = tempDirs();
let dir: string;
let bare: string;
let checkout: string;
let work: string;

/** A push from `cwd` into the bare repository as `user`; git's exit and what the hooks said. */
const pushAs = (user: string, cwd: string, ...refspecs: string[]) =>
  runProgram('git', ['push', '--force', bare, ...refspecs], cwd, { REMOTE_USER: user });

/** In the node's working clone: a new report commit holding `files` (status.json at least). */
async function report(files: Record<string, string>): Promise<void> {
  for (const [path, text] of Object.entries(files)) writeFileSync(join(work, path), text);
  await git(work, 'add', '-A');
  await git(work, '-c', 'user.name=n', '-c', 'user.email=n@n', '-c', 'commit.gpgsign=false', 'commit', '--quiet', '-m', 'report');
}

const hookScript = (name: string) => `#!/bin/sh\nexec node ${MESH_CLI} hook ${name} "$@"\n`;

beforeAll(async () => {
  dir = tmp('mesh-hook-');
  bare = join(dir, 'fleet.git');
  await git(dir, 'init', '--quiet', '--bare', '--initial-branch=main', bare);
  for (const name of ['pre-receive', 'post-receive']) {
    writeFileSync(join(bare, 'hooks', name), hookScript(name));
    chmodSync(join(bare, 'hooks', name), 0o755);
  }
  writeFileSync(join(dir, 'operators'), 'alice\n');
  await git(bare, 'config', 'mesh.operators', join(dir, 'operators'));
  await git(bare, 'config', 'mesh.htpasswd', join(dir, 'nodes.htpasswd'));
  checkout = join(dir, 'fleet');
  const init = await cli(dir, 'init', checkout, '--signing-key', signingKey(join(dir, 'key')), '--signer', 'alice@example.org');
  expect(init.code, init.stderr).toBe(0);
  for (const [k, v] of [['user.name', 'alice'], ['user.email', 'alice@example.org']]) await git(checkout, 'config', k!, v!);
  await git(checkout, 'remote', 'add', 'origin', bare);
  for (const node of ['web-1', 'web-2']) expect((await cli(checkout, 'token', 'issue', node, '--url', 'http://127.0.0.1:1/fleet.git', '--out', join(dir, `${node}.token`))).code).toBe(0);
  const pushed = await pushAs('alice', checkout, 'main');
  expect(pushed.code, pushed.stderr).toBe(0);
  work = join(dir, 'work');
  await git(dir, 'clone', '--quiet', bare, work);
});

describe('mesh-cli hook pre-receive in a bare repository', () => {
  it('a node pushes its own report branch, rewrites it, and nothing else', async () => {
    await report({ 'status.json': '{\n  "kind": "pass"\n}\n' });
    expect((await pushAs('web-1', work, 'HEAD:refs/heads/reports/web-1')).code).toBe(0);
    const refused = await Promise.all([
      pushAs('web-1', work, 'HEAD:refs/heads/main'),
      pushAs('web-1', work, 'HEAD:refs/heads/reports/web-2'),
      pushAs('web-1', work, ':refs/heads/reports/web-1'),
      pushAs('mallory', work, 'HEAD:refs/heads/reports/mallory'),
      pushAs('', work, 'HEAD:refs/heads/reports/nobody'),
    ]);
    expect(refused.map((r) => r.code)).toEqual([1, 1, 1, 1, 1]);
    expect(refused.map((r) => r.stderr.split('\n').filter((l) => l.startsWith('remote: mesh: ')).map((l) => l.trimEnd()))).toEqual([
      ['remote: mesh: node web-1 may push only refs/heads/reports/web-1, not refs/heads/main'],
      ['remote: mesh: node web-1 may push only refs/heads/reports/web-1, not refs/heads/reports/web-2'],
      ['remote: mesh: node web-1 may not delete its report branch'],
      ['remote: mesh: push refused: mallory is neither an operator nor a node of this fleet'],
      ['remote: mesh: push refused: an anonymous user is neither an operator nor a node of this fleet'],
    ]);
    await git(work, '-c', 'user.name=n', '-c', 'user.email=n@n', '-c', 'commit.gpgsign=false', 'commit', '--quiet', '--amend', '-m', 'a heartbeat replaces the last');
    expect((await pushAs('web-1', work, 'HEAD:refs/heads/reports/web-1')).code).toBe(0);
    expect(await git(bare, 'rev-parse', 'refs/heads/reports/web-1')).toBe(await git(work, 'rev-parse', 'HEAD'));
  });

  it("an operator pushes anything but deleting main; GL_USERNAME and GITEA_PUSHER_NAME name the pusher too", async () => {
    const drop = await pushAs('alice', checkout, ':refs/heads/main');
    expect(drop.stderr).toContain("remote: mesh: refs/heads/main is the fleet's main branch; it cannot be deleted");
    expect((await pushAs('alice', checkout, 'main:refs/heads/other')).code).toBe(0);
    expect((await pushAs('alice', checkout, ':refs/heads/other')).code).toBe(0);
    const gitlab = await runProgram('git', ['push', bare, 'main:refs/heads/reports/web-2'], work, { GL_USERNAME: 'web-1' });
    expect(gitlab.stderr).toContain('remote: mesh: node web-1 may push only refs/heads/reports/web-1, not refs/heads/reports/web-2');
    expect((await runProgram('git', ['push', bare, 'main:refs/heads/elsewhere'], checkout, { GITEA_PUSHER_NAME: 'alice' })).code).toBe(0);
  });

  it('a report file over 1 MiB is refused, naming it', async () => {
    await report({ 'status.json': 'x'.repeat(1024 * 1024 + 1) });
    const big = await pushAs('web-2', work, 'HEAD:refs/heads/reports/web-2');
    expect(big.code).toBe(1);
    expect(big.stderr).toMatch(/remote: mesh: report [0-9a-f]{40} of web-2 holds status.json \(1048577 bytes\), over the limit of 1048576 bytes per file; the push is refused/);
    await git(work, 'reset', '--quiet', '--hard', 'HEAD~1');
  });

  it('a token enrols once per generation, whatever the report branch holds', async () => {
    await report({ 'status.json': '{\n  "kind": "enrolment"\n}\n' });
    expect((await pushAs('web-2', work, 'HEAD:refs/heads/reports/web-2')).code).toBe(0);
    expect((await pushAs('web-2', work, 'HEAD~1:refs/heads/reports/web-2')).code).toBe(0); // the branch blanked of its enrolment
    const again = await pushAs('web-2', work, 'HEAD:refs/heads/reports/web-2');
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/remote: mesh: the token of web-2 generation 1 was already used: it enrolled a machine at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\. A token enrols one machine once; issue a new one with 'mesh-cli token issue web-2'/);
  });

  it('the update-hook form refuses the same', async () => {
    const update = await runProgram('node', [MESH_CLI, 'hook', 'update', 'refs/heads/main', '0'.repeat(40), await git(work, 'rev-parse', 'HEAD')], bare, { GIT_DIR: bare, REMOTE_USER: 'web-1' });
    expect(update).toMatchObject({ code: 1, stderr: 'mesh: node web-1 may push only refs/heads/reports/web-1, not refs/heads/main\n' });
  });
});

describe('identities from the trusted main, and the password file', () => {
  it('post-receive writes every node credential; an unsigned node.yaml adds nobody; revoke removes one', async () => {
    const names = () => readFileSync(join(dir, 'nodes.htpasswd'), 'utf8').split('\n').filter(Boolean).map((l) => l.split(':')[0]);
    expect(names()).toEqual(['web-1', 'web-2']);
    expect(readFileSync(join(dir, 'nodes.htpasswd'), 'utf8')).toMatch(/^web-1:\$5\$rounds=1000\$[^:\n]+\nweb-2:/);
    // Pushed with the operator's git credential alone: an unsigned commit naming a new node.
    await git(dir, 'clone', '--quiet', bare, join(dir, 'attacker'));
    const attacker = join(dir, 'attacker');
    const yaml = readFileSync(join(checkout, 'nodes/web-1/node.yaml'), 'utf8').replaceAll('web-1', 'web-9');
    await runProgram('mkdir', ['-p', 'nodes/web-9'], attacker);
    writeFileSync(join(attacker, 'nodes/web-9/node.yaml'), yaml);
    await git(attacker, 'add', '-A');
    await git(attacker, '-c', 'user.name=m', '-c', 'user.email=m@m', '-c', 'commit.gpgsign=false', 'commit', '--quiet', '-m', 'unsigned');
    const unsigned = await pushAs('alice', attacker, 'HEAD:main');
    expect(unsigned.stderr).toMatch(/remote: mesh: main's tip [0-9a-f]{40} is not trusted/);
    expect(names()).toEqual(['web-1', 'web-2']);
    await report({ 'status.json': '{\n  "kind": "pass"\n}\n' });
    expect((await pushAs('web-9', work, 'HEAD:refs/heads/reports/web-9')).stderr).toContain('remote: mesh: push refused: web-9 is neither an operator nor a node of this fleet');
    // Back to the signed main; revoke web-2.
    expect((await pushAs('alice', checkout, '+main:main')).code).toBe(0);
    expect((await cli(checkout, 'revoke', 'web-2')).code).toBe(0);
    expect((await pushAs('alice', checkout, 'main')).code).toBe(0);
    expect(names()).toEqual(['web-1']);
    expect((await pushAs('web-2', work, 'HEAD:refs/heads/reports/web-2')).stderr).toContain('remote: mesh: push refused: web-2 is neither an operator nor a node of this fleet');
  });
});
