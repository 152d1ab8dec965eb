/**
 * Debian's Apache httpd for the tests of fleets served behind it (apache.test.ts: git
 * http-backend with mesh's hooks; gitolite.test.ts: gitolite in its HTTP mode). Apache runs on a
 * free 127.0.0.1 port with its own configuration in a temporary folder (`apache2 -X -f CONF`, one
 * process). Started as root it serves as `nobody` (Apache refuses to serve as root), so the folder
 * is handed to them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { expect } from 'vitest';
import { cli, git, hostCmd, newMachine, runProgram, signingKey, type Run } from './fleet.js';

export const APACHE = '/usr/sbin/apache2';
const MODULES = '/usr/lib/apache2/modules';
/** Why the Apache tests cannot run here, or null. */
export const apacheMissing = existsSync(APACHE) ? null : `${APACHE} is not installed (apt-get install apache2, as scripts/install-deps.sh does)`;
export const asRoot = process.getuid?.() === 0;
export const NOBODY = 65534;

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    }).on('error', reject);
  });
}

/**
 * An Apache configuration for the folder `dir` on `port`: basic auth for `location` from two
 * password files (the operators' and the nodes', dir/operators.htpasswd and dir/nodes.htpasswd),
 * with `lines` (what serves the location) in between.
 */
export function apacheConf(dir: string, port: number, location: string, lines: string[]): string {
  const modules = ['mpm_prefork', 'authn_core', 'authn_file', 'auth_basic', 'authz_core', 'authz_user', 'alias', 'cgi', 'env'];
  return [
    `ServerRoot ${dir}`, `Listen 127.0.0.1:${port}`, 'ServerName 127.0.0.1', `PidFile ${dir}/httpd.pid`, `ErrorLog ${dir}/error.log`, 'LogLevel warn',
    ...modules.map((m) => `LoadModule ${m}_module ${MODULES}/mod_${m}.so`),
    ...(asRoot ? ['User nobody', 'Group nogroup'] : []),
    ...lines,
    `<AuthnProviderAlias file operators>\n  AuthUserFile ${dir}/operators.htpasswd\n</AuthnProviderAlias>`,
    `<AuthnProviderAlias file nodes>\n  AuthUserFile ${dir}/nodes.htpasswd\n</AuthnProviderAlias>`,
    `<Location ${location}>\n  AuthType Basic\n  AuthName "mesh fleet"\n  AuthBasicProvider operators nodes\n  Require valid-user\n</Location>`,
    '',
  ].join('\n');
}

/**
 * Make everything under `dir` nobody's and let nobody pass through the folder above it (the test
 * run's temporary folder, removed after the run; never put back while the run lasts, since two
 * suites served by Apache may run at once under it).
 */
export function handToNobody(dir: string): void {
  const chownAll = (path: string) => {
    chownSync(path, NOBODY, NOBODY);
    if (statSync(path).isDirectory()) for (const name of readdirSync(path)) chownAll(join(path, name));
  };
  chownAll(dir);
  chmodSync(dirname(dir), (statSync(dirname(dir)).mode & 0o7777) | 0o011);
}

/** Start Apache on `conf` and wait until `probe` answers. */
export async function startApache(conf: string, probe: string): Promise<ChildProcess> {
  const proc = spawn(APACHE, ['-X', '-f', conf], { stdio: ['ignore', 'pipe', 'pipe'] });
  let said = '';
  proc.stderr!.on('data', (b: Buffer) => { said += b.toString(); });
  for (let i = 0; i < 100; i++) {
    if (proc.exitCode !== null) throw new Error(`apache2 exited with ${proc.exitCode}: ${said}`);
    const r = await fetch(probe).catch(() => null);
    if (r) {
      await r.arrayBuffer();
      return proc;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`apache2 did not answer: ${said}`);
}

/** Stop an Apache started by startApache. */
export async function stopApache(proc: ChildProcess | undefined): Promise<void> {
  if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
  const gone = new Promise((resolve) => proc.once('exit', resolve));
  proc.kill('SIGTERM');
  await gone;
}

/** A fleet behind a web server: the operator's checkout, and git as the operator or a node. */
export interface HostedFleet {
  checkout: string;
  /** The fleet URL with `user`'s credential in it. */
  withCredential(user: string, password: string): string;
  operatorGit(...args: string[]): Promise<Run>;
}

const noPrompt = { GIT_TERMINAL_PROMPT: '0' };

/**
 * The fleet at `fleetUrl` (served from `dir`): the operator's checkout (dir/fleet) made with
 * `mesh-cli init`, tokens for web-1 and web-2 issued for `fleetUrl` (dir/<node>.token), pushed.
 */
export async function hostedFleet(dir: string, fleetUrl: string, operatorSecret: string): Promise<HostedFleet> {
  const withCredential = (user: string, password: string) => fleetUrl.replace('://', `://${user}:${encodeURIComponent(password)}@`);
  const checkout = join(dir, 'fleet');
  const operatorGit = (...args: string[]) => runProgram('git', args, checkout, noPrompt);
  const init = await cli(dir, 'init', checkout, '--signing-key', signingKey(join(dir, 'operator_ed25519')), '--signer', 'op@example.org', '--remote', withCredential('operator', operatorSecret));
  expect(init.code, init.stderr).toBe(0);
  for (const [k, v] of [['user.name', 'op'], ['user.email', 'op@example.org']]) await git(checkout, 'config', k!, v!);
  for (const node of ['web-1', 'web-2']) {
    const issued = await cli(checkout, 'token', 'issue', node, '--url', fleetUrl, '--out', join(dir, `${node}.token`));
    expect(issued.code, issued.stderr).toBe(0);
  }
  await git(checkout, 'commit', '--quiet', '--allow-empty', '-m', 'base');
  const pushed = await operatorGit('push', '-u', 'origin', 'main');
  expect(pushed.code, pushed.stderr).toBe(0);
  return { checkout, withCredential, operatorGit };
}

/** A real mesh-host for web-1 (dir/machines/web-1) enrolled with its token and one pass run; its report is on its branch and status shows it applied. */
export async function enrolWeb1(dir: string, fleet: HostedFleet): Promise<string> {
  const root = newMachine(join(dir, 'machines', 'web-1'));
  mkdirSync(join(root, 'var/lib/dpkg'), { recursive: true });
  writeFileSync(join(root, 'var/lib/dpkg/status'), '');
  const enrolled = await hostCmd(root, 'enrol', '--token-file', join(dir, 'web-1.token'));
  expect(enrolled.code, enrolled.stderr).toBe(0);
  const pass = await hostCmd(root, 'run', '--once');
  expect(pass.code, pass.stderr).toBe(0);
  expect((await fleet.operatorGit('ls-remote', 'origin')).stdout).toMatch(/^[0-9a-f]{40}\trefs\/heads\/reports\/web-1$/m);
  const main = await git(fleet.checkout, 'rev-parse', 'HEAD');
  const status = await cli(fleet.checkout, 'status', '--json');
  expect(JSON.parse(status.stdout).nodes.find((n: { node: string }) => n.node === 'web-1')).toMatchObject({ commit: main, outcome: 'applied', signature: 'valid' });
  return root;
}

/** The password of the node enrolled at `root`. */
export function credentialOf(root: string): string {
  return (JSON.parse(readFileSync(join(root, 'etc/mesh-host/credential.json'), 'utf8')) as { password: string }).password;
}

/** web-1 (enrolled at `root`) pushes main and web-2's branch: both refused by mesh's hook, nothing changed; git's stderr of the second. */
export async function web1PushesRefused(dir: string, fleet: HostedFleet, root: string): Promise<string> {
  const work = join(dir, 'web-1-work');
  await git(dir, 'clone', '--quiet', fleet.withCredential('web-1', credentialOf(root)), work);
  await git(work, '-c', 'user.name=x', '-c', 'user.email=x@x', '-c', 'commit.gpgsign=false', 'commit', '--quiet', '--allow-empty', '-m', 'not yours');
  const before = (await fleet.operatorGit('ls-remote', 'origin')).stdout;
  const main = await runProgram('git', ['push', 'origin', 'HEAD:refs/heads/main'], work, noPrompt);
  expect(main.code).not.toBe(0);
  expect(main.stderr).toContain('remote: mesh: node web-1 may push only refs/heads/reports/web-1, not refs/heads/main');
  const other = await runProgram('git', ['push', 'origin', 'HEAD:refs/heads/reports/web-2'], work, noPrompt);
  expect(other.code).not.toBe(0);
  expect(other.stderr).toContain('remote: mesh: node web-1 may push only refs/heads/reports/web-1, not refs/heads/reports/web-2');
  expect((await fleet.operatorGit('ls-remote', 'origin')).stdout).toBe(before);
  return other.stderr;
}
