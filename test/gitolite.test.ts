/**
 * A fleet served by gitolite in its HTTP mode behind Debian's Apache httpd, as docs/servers.md
 * sets it up: gitolite-shell as Apache's CGI program with basic auth from the operators' and the
 * nodes' password files; in gitolite.conf the operator may push anything, everyone reads, anyone
 * may push under `reports/`, and mesh's pre-receive hook confines each node to its own branch;
 * mesh's hooks installed as gitolite's repo-specific hooks
 * (`mesh-cli hook pre-receive` and `post-receive`, which writes the nodes' password file from the
 * trusted main), their settings as `config mesh.*` lines. A real mesh-host enrols and runs a pass
 * through it; a node's push to another node's branch and to main is refused.
 *
 * gitolite's home is a temporary folder (GITOLITE_HTTP_HOME), set up with `gitolite setup` and
 * compiled from gitolite.conf as its admin would after a push of gitolite-admin. Without apache2
 * or gitolite the suite is skipped with its reason, unless CI is set: there it fails
 * (scripts/install-deps.sh installs both).
 */
import type { ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, type TestContext } from 'vitest';
import { shaCrypt } from '../core/access/sha-crypt.js';
import { apacheConf, apacheMissing, asRoot, enrolWeb1, freePort, handToNobody, hostedFleet, startApache, stopApache, web1PushesRefused, type HostedFleet } from './helpers/apache.js';
import { MESH_CLI, runProgram } from './helpers/fleet.js';
import { tempDirs } from './helpers/tmp.js';

const GITOLITE = '/usr/bin/gitolite';
const SHELL = '/usr/share/gitolite3/gitolite-shell';
const missing = apacheMissing ?? (existsSync(GITOLITE) && existsSync(SHELL) ? null : `${GITOLITE} is not installed (apt-get install gitolite3, as scripts/install-deps.sh does)`);
const tmp = tempDirs();
const operatorSecret = 'operator-secret-for-gitolite';

let dir: string;
let url: string;
let apache: ChildProcess | undefined;
let fleet: HostedFleet;

/** gitolite's home in `dir`, set up and compiled with the fleet repository as docs/servers.md describes. */
async function gitoliteHome(dir: string): Promise<string> {
  const home = join(dir, 'home');
  mkdirSync(home);
  const env = { HOME: home, USER: 'gitolite', GIT_CONFIG_NOSYSTEM: '1' };
  const run = async (...args: string[]) => {
    const r = await runProgram(args[0]!, args.slice(1), dir, env);
    expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(0);
  };
  await run('git', 'config', '--global', 'init.defaultBranch', 'main');
  await run(GITOLITE, 'setup', '-a', 'operator');
  // .gitolite.rc: repo-specific hooks from LOCAL_CODE, and `config mesh.*` lines allowed.
  const rcFile = join(home, '.gitolite.rc');
  const rc = readFileSync(rcFile, 'utf8')
    .replace("GIT_CONFIG_KEYS                 =>  ''", "GIT_CONFIG_KEYS                 =>  'mesh\\..*'")
    .replace('# LOCAL_CODE                =>  "$ENV{HOME}/local",', 'LOCAL_CODE                =>  "$ENV{HOME}/local",')
    .replace("# 'repo-specific-hooks',", "'repo-specific-hooks',");
  expect(rc.match(/^\s*(GIT_CONFIG_KEYS\s+=>\s+'mesh|LOCAL_CODE\s+=>|'repo-specific-hooks',)/gm)).toHaveLength(3);
  writeFileSync(rcFile, rc);
  // The hooks run as Apache's user (nobody when the test runs as root): a copy of mesh-cli in the folder handed to them.
  const meshCli = join(dir, 'bin', 'mesh-cli.mjs');
  mkdirSync(join(dir, 'bin'));
  copyFileSync(MESH_CLI, meshCli);
  const hooks = join(home, 'local', 'hooks', 'repo-specific');
  mkdirSync(hooks, { recursive: true });
  writeFileSync(join(hooks, 'mesh'), `#!/bin/sh\nexec ${process.execPath} ${meshCli} hook pre-receive\n`, { mode: 0o755 });
  writeFileSync(join(hooks, 'mesh-post'), `#!/bin/sh\nexec ${process.execPath} ${meshCli} hook post-receive\n`, { mode: 0o755 });
  writeFileSync(join(home, '.gitolite', 'conf', 'gitolite.conf'), [
    'repo gitolite-admin', '    RW+     =   operator', '',
    'repo fleet',
    '    RW+                   =   operator',
    '    R                     =   @all',
    '    RW+ reports/          =   @all',
    '    option hook.pre-receive  = mesh',
    '    option hook.post-receive = mesh-post',
    `    config mesh.operators = ${dir}/operators.htpasswd`,
    `    config mesh.htpasswd = ${dir}/nodes.htpasswd`,
    '',
  ].join('\n'));
  await run(GITOLITE, 'compile');
  await run(GITOLITE, 'trigger', 'POST_COMPILE');
  writeFileSync(join(dir, 'operators.htpasswd'), `operator:${shaCrypt(operatorSecret)}\n`);
  writeFileSync(join(dir, 'nodes.htpasswd'), '');
  return home;
}

const ready = (ctx: TestContext) => { if (missing) ctx.skip(`SKIPPED gitolite test: ${missing}`); };

describe('a fleet on gitolite in its HTTP mode behind Apache, with mesh-cli hook as its repo-specific hooks', () => {
  beforeAll(async () => {
    if (missing) {
      if (process.env.CI) throw new Error(`CI is set and ${missing}`);
      return;
    }
    dir = tmp('mesh-gitolite-');
    const port = await freePort();
    url = `http://127.0.0.1:${port}/git/`;
    const home = await gitoliteHome(dir);
    writeFileSync(join(dir, 'httpd.conf'), apacheConf(dir, port, '/git', [
      `SetEnv GITOLITE_HTTP_HOME ${home}`, `SetEnv GIT_PROJECT_ROOT ${home}/repositories`, 'SetEnv GIT_HTTP_EXPORT_ALL 1',
      `ScriptAlias /git/ ${SHELL}/`,
    ]));
    if (asRoot) handToNobody(dir);
    apache = await startApache(join(dir, 'httpd.conf'), `${url}fleet.git/info/refs?service=git-upload-pack`);
    fleet = await hostedFleet(dir, `${url}fleet.git`, operatorSecret);
  }, 180_000);

  afterAll(async () => {
    await stopApache(apache);
  });

  it('the post-receive hook wrote both node credentials from the trusted main', (ctx) => {
    ready(ctx);
    const lines = readFileSync(join(dir, 'nodes.htpasswd'), 'utf8').split('\n').filter(Boolean);
    expect(lines.map((l) => l.split(':')[0])).toEqual(['web-1', 'web-2']);
  });

  let web1: string;
  it('a real mesh-host enrols and runs a pass through gitolite; its report lands on its branch', async (ctx) => {
    ready(ctx);
    web1 = await enrolWeb1(dir, fleet);
    // The enrolment was recorded by mesh's hook, in the repository, out of reach of any push.
    expect(readdirSync(join(dir, 'home/repositories/fleet.git/mesh-enrolments'))).toEqual(['web-1.1']);
  });

  it("the node's credential cannot push main or another node's report branch", async (ctx) => {
    ready(ctx);
    await web1PushesRefused(dir, fleet, web1);
  });
});
