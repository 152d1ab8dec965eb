/**
 * A fleet served by Debian's Apache httpd and `git http-backend`, with mesh's rules as git hooks
 * (`mesh-cli hook`), as docs/servers.md sets it up: basic auth from two password files (the
 * operators', kept by hand, and the nodes', written by the post-receive hook from the trusted
 * main), a real mesh-host enrolling and running a pass through it. git http-backend runs through
 * the CGI program `mesh-cli hook http-backend-script` prints, so a node sees main and its own
 * report branch only. A node's push to another node's branch and to main is refused; revoke takes
 * effect at Apache at the next push of main.
 *
 * Apache runs on a free 127.0.0.1 port with its own configuration in a temporary folder
 * (`apache2 -X -f CONF`, one process). Started as root it serves as `nobody` (Apache refuses to
 * serve as root), so the folder is made theirs. Without apache2 the suite is skipped with its
 * reason, unless CI is set: there it fails (scripts/install-deps.sh installs it).
 */
import type { ChildProcess } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, type TestContext } from 'vitest';
import { parse } from 'yaml';
import { shaCrypt } from '../core/access/sha-crypt.js';
import { apacheConf, apacheMissing as missing, asRoot, credentialOf, enrolWeb1, freePort, handToNobody, hostedFleet, startApache, stopApache, web1PushesRefused, type HostedFleet } from './helpers/apache.js';
import { cli, git, MESH_CLI, runProgram } from './helpers/fleet.js';
import { tempDirs } from './helpers/tmp.js';

const tmp = tempDirs();
const noPrompt = { GIT_TERMINAL_PROMPT: '0' };

let dir: string;
let url: string;
let apache: ChildProcess | undefined;
let checkout: string;
let fleet: HostedFleet;
const operatorSecret = 'operator-secret-for-the-test';

/** The bare repository with mesh's hooks, as docs/servers.md sets it up. */
async function fleetRepo(dir: string): Promise<string> {
  const bare = join(dir, 'git', 'fleet.git');
  mkdirSync(dirname(bare), { recursive: true });
  await git(dir, 'init', '--quiet', '--bare', '--initial-branch=main', bare);
  // The hooks run as Apache's user (nobody when the test runs as root), who may not read the checkout
  // (a clone under /root is 0700): they run a copy of mesh-cli in the folder handed to that user.
  const cli = join(dir, 'bin', 'mesh-cli.mjs');
  mkdirSync(dirname(cli), { recursive: true });
  copyFileSync(MESH_CLI, cli);
  for (const hook of ['pre-receive', 'post-receive']) {
    writeFileSync(join(bare, 'hooks', hook), `#!/bin/sh\nexec ${process.execPath} ${cli} hook ${hook}\n`, { mode: 0o755 });
  }
  const backend = await runProgram(process.execPath, [MESH_CLI, 'hook', 'http-backend-script'], dir);
  expect(backend.code, backend.stderr).toBe(0);
  writeFileSync(join(dir, 'bin', 'mesh-git-http-backend'), backend.stdout, { mode: 0o755 });
  await git(bare, 'config', 'mesh.operators', join(dir, 'operators.htpasswd'));
  await git(bare, 'config', 'mesh.htpasswd', join(dir, 'nodes.htpasswd'));
  writeFileSync(join(dir, 'operators.htpasswd'), `operator:${shaCrypt(operatorSecret)}\n`);
  writeFileSync(join(dir, 'nodes.htpasswd'), '');
  return bare;
}

const withCredential = (user: string, password: string) => fleet.withCredential(user, password);
const operatorGit = (...args: string[]) => fleet.operatorGit(...args);
/** Skip the test, with the reason, when this machine has no apache2 (never under CI: there beforeAll has failed). */
const ready = (ctx: TestContext) => { if (missing) ctx.skip(`SKIPPED Apache test: ${missing}`); };

describe('a fleet behind Apache httpd and git http-backend, with mesh-cli hook', () => {
  beforeAll(async () => {
    if (missing) {
      if (process.env.CI) throw new Error(`CI is set and ${missing}`);
      return;
    }
    dir = tmp('mesh-apache-');
    const port = await freePort();
    url = `http://127.0.0.1:${port}/`;
    await fleetRepo(dir);
    writeFileSync(join(dir, 'httpd.conf'), apacheConf(dir, port, '/', [
      `SetEnv GIT_PROJECT_ROOT ${dir}/git`, 'SetEnv GIT_HTTP_EXPORT_ALL 1', `ScriptAlias / ${dir}/bin/mesh-git-http-backend/`,
    ]));
    if (asRoot) handToNobody(dir);
    apache = await startApache(join(dir, 'httpd.conf'), `${url}fleet.git/info/refs?service=git-upload-pack`);
    fleet = await hostedFleet(dir, `${url}fleet.git`, operatorSecret);
    checkout = fleet.checkout;
  }, 180_000);

  afterAll(async () => {
    await stopApache(apache);
  });

  it('the post-receive hook wrote both node credentials from the trusted main', (ctx) => {
    ready(ctx);
    const lines = readFileSync(join(dir, 'nodes.htpasswd'), 'utf8').split('\n').filter(Boolean);
    expect(lines.map((l) => l.split(':')[0])).toEqual(['web-1', 'web-2']);
    for (const line of lines) expect(line).toMatch(/^web-\d:\$5\$rounds=1000\$[./0-9A-Za-z]{16}\$[./0-9A-Za-z]{43}$/);
  });

  let web1: string;
  it('a real mesh-host enrols and runs a pass through Apache; its report lands on its branch', async (ctx) => {
    ready(ctx);
    web1 = await enrolWeb1(dir, fleet);
    // The enrolment was recorded by the hook, in the repository, out of reach of any push.
    expect(readdirSync(join(dir, 'git/fleet.git/mesh-enrolments'))).toEqual(['web-1.1']);
  });

  it("a node sees main and its own report branch only; an operator sees every branch", async (ctx) => {
    ready(ctx);
    // Another node's branch, put there by the operator (who may push any branch).
    const pushed = await operatorGit('push', 'origin', 'HEAD:refs/heads/reports/web-2');
    expect(pushed.code, pushed.stderr).toBe(0);
    const refsOf = (out: string) => out.split('\n').filter(Boolean).map((l) => l.split('\t')[1]).sort();
    expect(refsOf((await operatorGit('ls-remote', 'origin')).stdout)).toEqual(['HEAD', 'refs/heads/main', 'refs/heads/reports/web-1', 'refs/heads/reports/web-2']);
    const asNode = await runProgram('git', ['ls-remote', withCredential('web-1', credentialOf(web1))], dir, noPrompt);
    expect(asNode.code, asNode.stderr).toBe(0);
    expect(refsOf(asNode.stdout)).toEqual(['HEAD', 'refs/heads/main', 'refs/heads/reports/web-1']);
  });

  it("the node's credential cannot push main or another node's report branch", async (ctx) => {
    ready(ctx);
    const other = await web1PushesRefused(dir, fleet, web1);
    // Hidden from this node, the branch is also one git itself refuses to update for it.
    expect(other).toContain('HEAD -> reports/web-2 (deny updating a hidden ref)');
  });

  it("revoke takes effect at Apache: the revoked node's credential is refused once the commit is pushed", async (ctx) => {
    ready(ctx);
    const web2 = parse(readFileSync(join(dir, 'web-2.token'), 'utf8').replace(/^#.*\n/gm, '')) as { credential: { password: string } };
    const asWeb2 = () => runProgram('git', ['ls-remote', withCredential('web-2', web2.credential.password)], dir, noPrompt);
    expect((await asWeb2()).code).toBe(0);
    expect((await cli(checkout, 'revoke', 'web-2')).code).toBe(0);
    const pushed = await operatorGit('push');
    expect(pushed.code, pushed.stderr).toBe(0);
    expect(pushed.stderr).toContain('remote: mesh: ');
    const refused = await asWeb2();
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/Authentication failed|401/);
    expect(readFileSync(join(dir, 'nodes.htpasswd'), 'utf8').split('\n').filter(Boolean).map((l) => l.split(':')[0])).toEqual(['web-1']);
  });
});
