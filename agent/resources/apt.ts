/**
 * The apt-get and dpkg-query layer under the `package` resource, confined to the machine at
 * `root`. apt reads its configuration before its command line, so the host's own apt.conf.d
 * (hooks, caches, debconf) would leak into a sandbox: an APT_CONFIG file that sets `Dir` first
 * makes apt read the root's configuration instead, and the command line then pins every path
 * under the root again, so that nothing a config file says can move them. apt 2.6 passes no
 * --root to dpkg by itself: without `DPkg::Options::=--root` it installs into the real machine.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { MeshError } from '../../core/errors.js';
import type { ExecResult, HostContext } from './handler.js';

/** What dpkg says about one package that is (at least partly) installed. */
export interface Installed extends Record<string, unknown> {
  version: string;
  /** dpkg's state word: `installed`, or `unpacked`, `half-configured`… for a broken install. */
  status: string;
}

/** The root's dpkg database folder; fails when the machine at `root` has no package manager. */
export function dpkgDir(root: string): string {
  const status = join(resolve(root), 'var/lib/dpkg/status');
  if (!existsSync(status)) {
    throw new MeshError('E_NO_PACKAGE_MANAGER', `no package manager under ${resolve(root)}: ${status} does not exist. mesh installs packages through this machine's own dpkg and apt and never creates a package database; install dpkg and apt here first, or remove the package resources from this node's declaration`, { data: { root } });
  }
  return dirname(status);
}

/**
 * The installed version and dpkg state of `name` in the root's own dpkg database; null when not
 * installed. A package removed but for its configuration files counts as not installed, unless
 * `leftovers` asks for them: it is then `config-files` at the version they came with.
 */
export async function queryInstalled(ctx: HostContext, name: string, leftovers = false): Promise<Installed | null> {
  const admindir = dpkgDir(ctx.root);
  const r = await ctx.exec('dpkg-query', [`--admindir=${admindir}`, '--show', '--showformat=${Status}\\t${Version}\\n', name], { env: { LC_ALL: 'C' } });
  if (r.code === 1 && /no packages found/.test(r.stderr)) return null;
  if (r.code !== 0) throw aptFailure(`dpkg-query --admindir=${admindir} --show ${name}`, r, 'check that the dpkg database under the root is readable and not damaged');
  const [status = '', version = ''] = (r.stdout.split('\n')[0] ?? '').split('\t');
  const state = status.split(' ')[2] ?? '';
  if (state === 'config-files' && leftovers) return { version, status: state };
  return state === '' || state === 'not-installed' || state === 'config-files' ? null : { version, status: state };
}

/** apt-get's options that keep sources, lists, cache, logs and the dpkg database under `root`. */
export function aptOptions(root: string): string[] {
  const r = resolve(root);
  const options = [
    `Dir=${join(r, '/')}`,
    `Dir::Etc=${join(r, 'etc/apt')}/`,
    `Dir::State=${join(r, 'var/lib/apt')}/`,
    `Dir::State::status=${join(r, 'var/lib/dpkg/status')}`,
    `Dir::Cache=${join(r, 'var/cache/apt')}/`,
    `Dir::Log=${join(r, 'var/log/apt')}/`,
    `DPkg::Options::=--root=${r}`,
    `DPkg::Options::=--log=${join(r, 'var/log/dpkg.log')}`,
    'DPkg::Options::=--force-confdef',
    'DPkg::Options::=--force-confold',
    'DPkg::Use-Pty=0',
    'Acquire::Languages=none',
  ];
  // apt drops to the host's _apt user to download, who cannot read a private folder; a sandbox root is not a real machine.
  if (r !== '/') options.push('APT::Sandbox::User=root');
  return options.flatMap((o) => ['-o', o]);
}

/** Run `apt-get -q ARGS` against the machine at the root (never the host's own configuration). */
export async function aptGet(ctx: HostContext, args: string[]): Promise<ExecResult> {
  dpkgDir(ctx.root);
  const r = resolve(ctx.root);
  const dir = mkdtempSync(join(tmpdir(), 'mesh-apt-'));
  try {
    const config = join(dir, 'apt.conf');
    writeFileSync(config, `Dir "${join(r, '/')}";\nDir::State::status "${join(r, 'var/lib/dpkg/status')}";\n`);
    const env = { APT_CONFIG: config, LC_ALL: 'C', DEBIAN_FRONTEND: 'noninteractive', DEBCONF_NONINTERACTIVE_SEEN: 'true', DPKG_COLORS: 'never' };
    return await ctx.exec('apt-get', ['-q', ...aptOptions(r), ...args], { env });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Refresh the root's package lists when they are missing or older than its sources, or when `force`d. Returns whether it ran. */
export async function refreshLists(ctx: HostContext, force = false): Promise<boolean> {
  const lists = join(resolve(ctx.root), 'var/lib/apt/lists');
  if (!force && !listsStale(ctx.root, lists)) return false;
  const r = await aptGet(ctx, ['update']);
  if (r.code !== 0) {
    throw aptFailure('apt-get update', r, "check the package sources under the root's /etc/apt and that the fleet's package repository can be reached");
  }
  // apt leaves the folder alone when nothing changed; its time is our record of the last update.
  const now = ctx.now();
  utimesSync(lists, now, now);
  return true;
}

function listsStale(root: string, lists: string): boolean {
  const names = existsSync(lists) ? readdirSync(lists) : [];
  if (!names.some((n) => n.includes('_Packages'))) return true;
  const etc = join(resolve(root), 'etc/apt');
  const parts = join(etc, 'sources.list.d');
  const sources = [join(etc, 'sources.list'), parts, ...(existsSync(parts) ? readdirSync(parts).map((n) => join(parts, n)) : [])];
  const newest = Math.max(0, ...sources.filter((p) => existsSync(p)).map((p) => statSync(p).mtimeMs));
  return newest > statSync(lists).mtimeMs;
}

/** Lines apt prints when the lists do not (yet) know a package or version (apt 3.0 may write its E: as Error:). */
export const NOT_FOUND = /^(?:E|Error): (Unable to locate package|Version '.*' for '.*' was not found|Package '.*' has no installation candidate)/m;

// Progress lines and apt's boilerplate around an unmet dependency say nothing about this failure.
const NOISE = /^(Reading package lists|Building dependency tree|Reading state information|Solving dependencies|\(Reading database|Some packages could not be installed|requested an impossible|distribution that some|or been moved out of|The following information may help)/;
/** apt 3.0's solver adds its own account of an unmet dependency after apt's (an E: line and indented ones): the same reason again. */
const SOLVER_CONTEXT = /^(?:E|Error): The following information from --solver/;

/** apt's output without progress, boilerplate or the 3.0 solver's restatement: what a person reads. */
function meaningful(text: string): string[] {
  const lines: string[] = [];
  let solver = false;
  for (const line of text.split('\n').map((l) => l.trimEnd())) {
    if (SOLVER_CONTEXT.test(line)) solver = true;
    else if (solver && !/^\s/.test(line)) solver = false;
    if (!solver && line.trim() !== '' && !NOISE.test(line)) lines.push(line);
  }
  return lines;
}

/** A failed apt/dpkg command as a MeshError: the last lines that say why (not the whole log) and what to do. */
export function aptFailure(command: string, r: ExecResult, todo: string, code = 'E_APT'): MeshError {
  const lines = meaningful(`${r.stdout}\n${r.stderr}`);
  // For an unknown package or version apt's E: line says it all; otherwise the lines above it say why (unmet dependencies, dpkg's own error).
  const shown = code === 'E_PACKAGE_NOT_FOUND' ? lines.filter((l) => /^(?:E|Error): /.test(l)) : lines.slice(-8);
  const why = shown.map((l) => `  ${l}`).join('\n');
  const locked = /Could not get lock|Unable to acquire the dpkg frontend lock/.test(why);
  return new MeshError(code, `${command} failed (exit ${r.code}):\n${why}\n${locked ? 'another package manager is running on this machine; mesh retries on its next pass' : todo}`, {
    next: locked ? 'retry' : 'human',
    data: { command, exit: r.code, output: lines.slice(-20) },
  });
}

/** `apt-get install NAME[=VERSION]`, refreshing the lists first when stale and once more when they do not know it. */
export async function installPackage(ctx: HostContext, name: string, version: string | undefined, reinstall: boolean): Promise<void> {
  const spec = version === undefined ? name : `${name}=${version}`;
  const args = ['install', '-y', '--allow-downgrades', ...(reinstall ? ['--reinstall'] : []), spec];
  const refreshed = await refreshLists(ctx);
  let r = await aptGet(ctx, args);
  if (r.code !== 0 && NOT_FOUND.test(r.stdout + r.stderr) && !refreshed) {
    await refreshLists(ctx, true);
    r = await aptGet(ctx, args);
  }
  if (r.code === 0) return;
  if (NOT_FOUND.test(r.stdout + r.stderr)) {
    const what = version === undefined ? name : `version ${version} of ${name}`;
    throw aptFailure(`apt-get install ${spec}`, r, `the package sources of this machine do not offer ${what}: publish it to the fleet's package repository, or declare a version it has`, 'E_PACKAGE_NOT_FOUND');
  }
  throw aptFailure(`apt-get install ${spec}`, r, 'fix the cause above (the package or the machine); the next pass tries again');
}

/** `apt-get remove NAME` (`purge`: `apt-get purge`, its configuration files too), refused when apt would also remove packages that depend on it. */
export async function removePackage(ctx: HostContext, name: string, purge = false): Promise<void> {
  const verb = purge ? 'purge' : 'remove';
  const plan = await aptGet(ctx, ['-s', verb, name]);
  if (plan.code !== 0) throw aptFailure(`apt-get ${verb} ${name}`, plan, 'fix the cause above; the next pass tries again');
  const others = [...plan.stdout.matchAll(/^(?:Remv|Purg) (\S+)/gm)].map((m) => m[1]!).filter((p) => p.split(':')[0] !== name);
  if (others.length > 0) {
    throw new MeshError('E_PACKAGE_NEEDED', `removing ${name} would also remove what depends on it (${others.join(', ')}): mesh removes only what it was asked to; remove or un-declare those first, or keep ${name} declared`, { data: { name, others } });
  }
  const r = await aptGet(ctx, [verb, '-y', name]);
  if (r.code !== 0) throw aptFailure(`apt-get ${verb} ${name}`, r, 'fix the cause above; the next pass tries again');
}
