/**
 * Debian's Apache httpd for the tests of fleets served behind it (apache.test.ts: git
 * http-backend with mesh's hooks; gitolite.test.ts: gitolite in its HTTP mode). Apache runs on a
 * free 127.0.0.1 port with its own configuration in a temporary folder (`apache2 -X -f CONF`, one
 * process). Started as root it serves as `nobody` (Apache refuses to serve as root), so the folder
 * is handed to them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, readdirSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';

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

/** Make everything under `dir` nobody's and let nobody pass through the folder above it; returns what puts that folder's mode back. */
export function handToNobody(dir: string): () => void {
  const chownAll = (path: string) => {
    chownSync(path, NOBODY, NOBODY);
    if (statSync(path).isDirectory()) for (const name of readdirSync(path)) chownAll(join(path, name));
  };
  chownAll(dir);
  const mode = statSync(dirname(dir)).mode & 0o7777;
  chmodSync(dirname(dir), mode | 0o011);
  return () => chmodSync(dirname(dir), mode);
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
