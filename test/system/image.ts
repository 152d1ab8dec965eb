/**
 * The Debian root the system tests boot, built once and cached under ~/.cache/mesh/system/
 * (never under the temporary folder, which every run empties):
 *
 *   <release>/                    `debootstrap --variant=minbase` with systemd as init
 *   nodejs_<version>_<arch>.deb   this machine's own Node, `dpkg-repack nodejs`
 *   <release>+nodejs_<version>/   the two together: what each run copies and boots
 *   <release>+nodejs/             a release whose own nodejs is new enough (Debian 13's 20.19):
 *                                 debootstrap with Debian's nodejs, booted as it is
 *
 * Each is made in a sibling folder and renamed into place when whole, so an interrupted build
 * is never taken for a finished one (it is left as *.partial-* and removed by the next build).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The cache folder: $XDG_CACHE_HOME/mesh/system, else ~/.cache/mesh/system. */
export const CACHE = join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'mesh', 'system');

/** Packages beyond minbase: systemd as PID 1, and what the nodejs package depends on. */
const INCLUDE = ['systemd', 'systemd-sysv', 'dbus', 'python3', 'ca-certificates', 'libstdc++6', 'libgcc-s1'];

/** Debian releases the system tests boot, and whether Debian's own nodejs there is new enough (>= 20.19) for mesh-host. */
export const RELEASES = { bookworm: { ownNode: false }, trixie: { ownNode: true } } as const;
export type Release = keyof typeof RELEASES;

/** A cache entry: `make(partial)` fills a fresh sibling folder, which becomes `path` only when make returns. */
async function cached(path: string, make: (partial: string) => Promise<void>): Promise<string> {
  if (existsSync(path)) return path;
  mkdirSync(CACHE, { recursive: true });
  const name = path.slice(CACHE.length + 1);
  // A partial entry whose builder is gone was interrupted; one whose builder runs is another run's.
  for (const old of readdirSync(CACHE)) if (old.startsWith(`${name}.partial-`) && !alive(Number(old.slice(name.length + 9)))) rmSync(join(CACHE, old), { recursive: true, force: true });
  const partial = `${path}.partial-${process.pid}`;
  try {
    await make(partial);
    renameSync(partial, path);
  } catch (e) {
    rmSync(partial, { recursive: true, force: true });
    if (existsSync(path)) return path; // another run finished the same entry first
    throw e;
  }
  return path;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The version of this machine's nodejs package, or why Node here cannot be repacked. */
export async function hostNodePackage(): Promise<{ version: string; arch: string } | { problem: string }> {
  const owner = await run('dpkg-query', ['--search', process.execPath]).catch(() => null);
  if (!owner || !/^nodejs(:\w+)?: /m.test(owner.stdout)) {
    return { problem: `this machine's Node (${process.execPath}) is not from a dpkg package named nodejs, and the container gets its Node with 'dpkg-repack nodejs': install Node >= 20.19 from NodeSource's Debian packages (or Debian's own nodejs where it is new enough)` };
  }
  const { stdout } = await run('dpkg-query', ['--show', '--showformat=${Version}\t${Architecture}\t${Depends}', 'nodejs']);
  const [version, arch, depends] = stdout.split('\t');
  // Debian's own nodejs is a small front to libnode<ABI> and the release's libuv, ICU and OpenSSL: repacked, it does not install on another release.
  const libnode = /\blibnode\d+\b/.exec(depends ?? '');
  if (libnode) {
    return { problem: `this machine's nodejs ${version} is Debian's own build, which needs this release's ${libnode[0]} and cannot be installed on another Debian release: install Node >= 20.19 from NodeSource's Debian packages (scripts/install-deps.sh says how) to boot this release's machine` };
  }
  return { version: version!, arch: arch! };
}

/** The bootable root for `release` with a Node that runs mesh-host installed, built on first use. */
export async function systemImage(release: Release, log: (line: string) => void): Promise<string> {
  const debootstrap = (include: string[]) => async (partial: string) => {
    log(`building the ${release} root with debootstrap (once; cached in ${CACHE})`);
    await run('debootstrap', ['--variant=minbase', `--include=${include.join(',')}`, release, partial, 'http://deb.debian.org/debian'], { maxBuffer: 64 << 20 });
  };
  if (RELEASES[release].ownNode) return cached(join(CACHE, `${release}+nodejs`), debootstrap([...INCLUDE, 'nodejs']));
  const node = await hostNodePackage();
  if ('problem' in node) throw new Error(node.problem);
  const fileVersion = node.version.replace(/^\d+:/, '');
  // The two slow steps (a few minutes each) share nothing: run them side by side.
  const [base, deb] = await Promise.all([
    cached(join(CACHE, release), debootstrap(INCLUDE)),
    cached(join(CACHE, `nodejs_${fileVersion}_${node.arch}.deb`), async (partial) => {
      log(`repacking this machine's nodejs ${node.version} with dpkg-repack (once; cached in ${CACHE})`);
      mkdirSync(partial);
      // Uncompressed: xz would spend minutes on a file that never leaves this machine.
      await run('dpkg-repack', ['--deb-option=-Znone', 'nodejs'], { cwd: partial, maxBuffer: 64 << 20 });
      const [made] = readdirSync(partial).filter((f) => f.endsWith('.deb'));
      if (!made) throw new Error(`dpkg-repack nodejs made no .deb in ${partial}`);
      renameSync(join(partial, made), `${partial}.deb`);
      rmSync(partial, { recursive: true });
      renameSync(`${partial}.deb`, partial);
    }),
  ]);
  return cached(join(CACHE, `${release}+nodejs_${fileVersion}`), async (partial) => {
    await run('cp', ['--reflink=auto', '-a', base, partial]);
    await run('dpkg', [`--root=${partial}`, '-i', deb], { maxBuffer: 64 << 20 });
  });
}

/** Build the cached roots of `releases` now (test/system/build-images.mjs: CI's install step), printing each one's path. */
export async function buildImages(releases: string[], log: (line: string) => void = console.log): Promise<void> {
  for (const release of releases) {
    if (!(release in RELEASES)) throw new Error(`unknown release ${release}: one of ${Object.keys(RELEASES).join(', ')}`);
    log(await systemImage(release as Release, log));
  }
}
