/**
 * mesh-host packages for the upgrade test, built by the real scripts/package-deb.mjs: two good
 * versions (A, B), one whose binary does not run at all (C, a truncated bundle), and two that
 * pass their self-test but do not stay up as the service: D crashes as soon as it starts, E
 * hangs in its first pass. Also the package repository served by the built `mesh-cli serve --packages`.
 */
import { execFile, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { MESH_CLI, TOP } from './fleet.js';

export const VERSIONS = { A: '1.0.1', B: '1.0.2', C: '1.0.3', D: '1.0.4', E: '1.0.5' } as const;

const run = promisify(execFile);

/** Build the five versions into `dir`; returns version → .deb path. */
export async function buildHostDebs(dir: string): Promise<Record<string, string>> {
  mkdirSync(dir, { recursive: true });
  const pack = async (version: string, bundle?: string) => {
    const args = [join(TOP, 'scripts/package-deb.mjs'), '--out', dir, ...(bundle ? ['--bundle', bundle] : [])];
    return (await run(process.execPath, args, { env: { ...process.env, MESH_BUILD_VERSION: version } })).stdout.trim();
  };
  const bundle = async (version: string) => {
    const out = join(dir, `build-${version}`);
    await run(process.execPath, [join(TOP, 'scripts/build.mjs')], { env: { ...process.env, MESH_BUILD_VERSION: version, MESH_BUILD_OUT: out } });
    return join(out, 'mesh-host.cjs');
  };
  const crashOnRun = (js: string) => {
    const [first, ...rest] = js.split('\n');
    const crash = `if (process.argv[2] === 'run') { console.error('mesh-host ${VERSIONS.D}: crashed on start'); process.exit(1); }`;
    return first!.startsWith('#!') ? [first, crash, ...rest].join('\n') : [crash, js].join('\n');
  };
  const broken = async () => {
    const d = await bundle(VERSIONS.D);
    const js = readFileSync(d, 'utf8');
    const c = join(dir, 'truncated.cjs');
    writeFileSync(c, js.slice(0, Math.floor(js.length / 2)));
    writeFileSync(d, crashOnRun(js));
    return Promise.all([pack(VERSIONS.C, c), pack(VERSIONS.D, d)]);
  };
  // E's first pass never ends (a timer keeps the process alive, as a stuck socket would).
  const hangs = async () => {
    const e = await bundle(VERSIONS.E);
    // The bundle is minified (whitespace only), so match the pass with or without spaces.
    const pass = /last\s*=\s*await reconcile\d*\(host\d*,\s*/;
    const js = readFileSync(e, 'utf8');
    if (!pass.test(js)) throw new Error(`cannot make ${VERSIONS.E} hang: the bundle has no ${pass}`);
    writeFileSync(e, js.replace(pass, (m) => `await new Promise(() => setInterval(() => {}, 60_000)); ${m}`));
    return pack(VERSIONS.E, e);
  };
  const [a, b, [c, d], e] = await Promise.all([pack(VERSIONS.A), pack(VERSIONS.B), broken(), hangs()]);
  return { [VERSIONS.A]: a, [VERSIONS.B]: b, [VERSIONS.C]: c, [VERSIONS.D]: d, [VERSIONS.E]: e };
}

/** The version of mesh-host the root's own dpkg has installed, or null. */
export function dpkgVersion(root: string, name = 'mesh-host'): string | null {
  try {
    return execFileSync('dpkg-query', [`--admindir=${root}/var/lib/dpkg`, '-W', '-f', '${Version}', name], { stdio: 'pipe' }).toString();
  } catch {
    return null;
  }
}

export interface PackageServer {
  url: string;
  dir: string;
  stop(): Promise<void>;
}

/** `mesh-cli serve --packages DIR` (with an empty --data) on a free port. */
export async function servePackages(dir: string): Promise<PackageServer> {
  const data = `${dir}-git`;
  for (const d of [dir, data]) mkdirSync(d, { recursive: true });
  const proc = spawn(process.execPath, [MESH_CLI, 'serve', '--data', data, '--packages', dir, '--port', '0'], { stdio: ['ignore', 'pipe', 'ignore'] });
  const first = await new Promise<string>((resolve, reject) => {
    createInterface({ input: proc.stdout! }).once('line', resolve);
    proc.once('exit', (code) => reject(new Error(`mesh-cli serve exited with ${code}`)));
  });
  const stop = () => new Promise<void>((resolve) => (proc.exitCode !== null ? resolve() : (proc.once('exit', () => resolve()), proc.kill('SIGTERM'))));
  return { url: first.replace(/^listening on /, ''), dir, stop };
}
