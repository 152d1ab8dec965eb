/**
 * What the host remembers about its own versions, in <state>/upgrade.json:
 *
 *   lastGood  the last version that completed a pass whose report reached the fleet. Its bundle
 *             and its .deb are kept in <state>/last-good/, so that a rollback needs neither the
 *             package repository nor any code of the version it replaces;
 *   pending   an upgrade that was installed and passed its self-test, waiting for the new
 *             version to prove itself by completing a pass and a report;
 *   rejected  a version that failed its self-test or was rolled back: refused while it is declared.
 */
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import * as z from 'zod';
import { loadYamlOrThrow } from '../../core/load.js';
import { writeFileAtomic } from '../atomic.js';
import { readConfig } from '../config.js';
import { MeshError } from '../../core/errors.js';
import { underRoot, type HostPaths } from '../paths.js';
import { aptFailure, aptGet, installPackage, queryInstalled, refreshLists } from '../resources/apt.js';
import type { HostContext } from '../resources/handler.js';

const Stamp = z.strictObject({ version: z.string(), at: z.string() });
const UpgradeState = z.strictObject({
  lastGood: Stamp.optional(),
  pending: z.strictObject({ from: z.string(), to: z.string(), at: z.string() }).optional(),
  rejected: Stamp.extend({ reason: z.string() }).optional(),
});
export type UpgradeState = z.infer<typeof UpgradeState>;

/** The machine path of the host's bundle, as its package installs it. */
export const BUNDLE = '/usr/lib/mesh-host/mesh-host.cjs';

/**
 * last-good/mesh-host.mjs: what every version's mesh-host-rollback.service runs. Before the host
 * was mesh-host.cjs it was the host itself; now it loads the mesh-host.cjs kept beside it, so
 * that a rollback started by an older version's unit (after a downgrade) still finds a host.
 */
export const LAST_GOOD_LOADER = "import { createRequire } from 'node:module';\ncreateRequire(import.meta.url)('./mesh-host.cjs');\n";

const stateFile = (paths: HostPaths) => join(paths.stateDir, 'upgrade.json');

/** <state>/last-good: the last good version's bundle and .deb. */
export const lastGoodDir = (paths: HostPaths) => join(paths.stateDir, 'last-good');

/** The host's upgrade record; empty when it never upgraded itself. */
export function readUpgradeState(paths: HostPaths): UpgradeState {
  const file = stateFile(paths);
  return existsSync(file) ? loadYamlOrThrow(readFileSync(file, 'utf8'), file, UpgradeState, `the host's upgrade record ${file}`) : {};
}

/** Change the upgrade record durably. */
export function updateUpgradeState(paths: HostPaths, change: (state: UpgradeState) => void): UpgradeState {
  const state = readUpgradeState(paths);
  change(state);
  writeFileAtomic(stateFile(paths), JSON.stringify(state, null, 1) + '\n', 0o600);
  return state;
}

/** The host's own package name: `hostPackage` in its config, else mesh-host. */
export function hostPackageName(paths: HostPaths): string {
  try {
    return readConfig(paths)?.hostPackage ?? 'mesh-host';
  } catch {
    return 'mesh-host'; // a broken config stops the host elsewhere, with its own message
  }
}

/** The file name apt and dpkg-deb give `name` at `version` (an epoch's colon is written %3a). */
export function debFileName(name: string, version: string): string {
  return `${name}_${version.replace(':', '%3a')}_all.deb`;
}

/** Record `version` as the last good one and keep its bundle and .deb. Returns why the .deb could not be kept, if so. */
export async function keepLastGood(ctx: HostContext, paths: HostPaths, name: string, version: string): Promise<string | undefined> {
  const dir = lastGoodDir(paths);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  copyAtomic(underRoot(ctx.root, BUNDLE), join(dir, 'mesh-host.cjs'));
  writeFileAtomic(join(dir, 'mesh-host.mjs'), LAST_GOOD_LOADER, 0o600);
  const deb = debFileName(name, version);
  for (const f of readdirSync(dir)) if (f.endsWith('.deb') && f !== deb) rmSync(join(dir, f));
  let problem: string | undefined;
  if (!existsSync(join(dir, deb))) {
    const cached = join(underRoot(ctx.root, '/var/cache/apt/archives'), deb);
    if (existsSync(cached)) copyAtomic(cached, join(dir, deb));
    else problem = await download(ctx, dir, name, version).catch((e: Error) => e.message);
  }
  updateUpgradeState(paths, (s) => {
    s.lastGood = { version, at: ctx.now().toISOString() };
    if (s.pending?.to === version) delete s.pending;
    if (s.rejected?.version === version) delete s.rejected;
  });
  return problem;
}

/** Install `version` of the host package again: from its kept .deb when that is the one kept, else from the package repository. */
export async function reinstallHost(ctx: HostContext, paths: HostPaths, name: string, version: string): Promise<void> {
  const kept = join(lastGoodDir(paths), debFileName(name, version));
  if (existsSync(kept)) {
    const r = await aptGet(ctx, ['install', '-y', '--allow-downgrades', kept]);
    if (r.code !== 0) throw aptFailure(`apt-get install ${kept}`, r, 'fix the cause above; the rollback is tried again when the host fails again');
  } else {
    await installPackage(ctx, name, version, false);
  }
  const now = await queryInstalled(ctx, name);
  if (now?.version !== version || now.status !== 'installed') {
    throw new MeshError('E_REINSTALL', `${name} ${version} was installed again, but dpkg now says ${now ? `${now.version} (${now.status})` : 'not installed'}`);
  }
}

/** `apt-get install --download-only --reinstall NAME=VERSION` into `dir` (the host was installed some other way than through apt). */
async function download(ctx: HostContext, dir: string, name: string, version: string): Promise<undefined> {
  mkdirSync(join(dir, 'partial'), { recursive: true });
  try {
    await refreshLists(ctx);
    const r = await aptGet(ctx, ['-o', `Dir::Cache::archives=${dir}/`, 'install', '-y', '--download-only', '--reinstall', `${name}=${version}`]);
    if (r.code !== 0) throw aptFailure(`apt-get install --download-only ${name}=${version}`, r, `a rollback to ${version} will need the package repository`);
  } finally {
    rmSync(join(dir, 'partial'), { recursive: true, force: true });
    rmSync(join(dir, 'lock'), { force: true });
  }
  return undefined;
}

function copyAtomic(from: string, to: string): void {
  copyFileSync(from, `${to}.tmp`);
  renameSync(`${to}.tmp`, to);
}
