/**
 * The repository that holds status's fetched report objects (status/git-remote.ts), in
 * generations: `.git/mesh/reports.git` is a symbolic link to the generation in use,
 * `reports.git-XXXXXX` beside it. A run takes the generation the link names when it starts and
 * keeps it to its end. Emptying the store (when it holds more than MAX_PACKS packs) makes a new
 * generation and moves the link to it in one rename, so that a run already at work, in the same
 * checkout, still finds every object it fetched: the generation it took is only marked retired,
 * and removed by a later run once RETIRED_FOR has passed. (Before, the store was removed in place,
 * under such a run.) A real folder at `reports.git`, from an earlier version, is used until it
 * is first emptied, then retired like a generation.
 */
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { tempBeside } from './temp-file.js';

/** Packs the store may hold before it is emptied at the start of a run. */
export const MAX_PACKS = 40;
/** How long a retired generation is kept for runs that took it before it was retired. */
export const RETIRED_FOR = 10 * 60_000;

const LINK = 'reports.git';
const GENERATION = /^reports\.git-[A-Za-z0-9]+$/;
/** The file that marks a generation retired; its modification time says since when. */
const RETIRED = 'mesh-retired';

/**
 * The repository a run in the store folder `folder` uses, with `config` as its configuration:
 * the generation in use, or a new empty one when that holds more than MAX_PACKS packs (or there
 * is none). Generations retired long enough ago are removed.
 */
export function storeRepo(folder: string, config: string, now = Date.now()): string {
  mkdirSync(folder, { recursive: true });
  const link = join(folder, LINK);
  const used = inUse(folder);
  let repo = used === null ? null : join(folder, used);
  if (repo !== null && packs(repo) <= MAX_PACKS) {
    writeConfig(repo, config);
  } else {
    const fresh = mkdtempSync(join(folder, `${LINK}-`));
    mkdirSync(join(fresh, 'objects', 'pack'), { recursive: true });
    mkdirSync(join(fresh, 'objects', 'info'));
    mkdirSync(join(fresh, 'refs'));
    writeFileSync(join(fresh, 'HEAD'), 'ref: refs/heads/main\n');
    writeFileSync(join(fresh, 'config'), config);
    if (used === LINK) renameSync(link, mkdtempSync(join(folder, `${LINK}-`))); // an earlier version's folder: a generation from now on (retired below)
    const next = tempBeside(link);
    symlinkSync(basename(fresh), next);
    renameSync(next, link); // the one step that moves every later run to the new generation
    repo = fresh;
  }
  rmSync(join(repo, RETIRED), { force: true }); // a run's sweep may have seen it between its making and the link's move
  sweep(folder, basename(repo), now);
  return repo;
}

/** The name in `folder` of the generation the link names (LINK itself: an earlier version's folder); null when there is none. */
function inUse(folder: string): string | null {
  const link = join(folder, LINK);
  try {
    if (lstatSync(link).isDirectory()) return LINK;
    const target = readlinkSync(link);
    return GENERATION.test(target) ? target : null;
  } catch {
    return null;
  }
}

/** Packs in `repo`'s object store (Infinity where it cannot be read: made again). */
function packs(repo: string): number {
  try {
    return readdirSync(join(repo, 'objects', 'pack')).filter((f) => f.endsWith('.pack')).length;
  } catch {
    return Infinity;
  }
}

/** The configuration written only when it changed: a run that reads it meanwhile never sees it half written. */
function writeConfig(repo: string, config: string): void {
  const file = join(repo, 'config');
  try {
    if (readFileSync(file, 'utf8') === config) return;
  } catch {
    // missing: written below
  }
  const tmp = tempBeside(file);
  writeFileSync(tmp, config);
  renameSync(tmp, file);
}

/**
 * Every generation in `folder` that is neither the link's nor `mine` is retired: marked when it
 * is first seen so, removed once it has been retired for RETIRED_FOR.
 */
function sweep(folder: string, mine: string, now: number): void {
  const current = inUse(folder);
  for (const name of readdirSync(folder)) {
    if (!GENERATION.test(name) || name === mine || name === current) continue;
    const dir = join(folder, name);
    const mark = join(dir, RETIRED);
    try {
      if (now - statSync(mark).mtimeMs >= RETIRED_FOR) rmSync(dir, { recursive: true, force: true });
    } catch {
      try {
        writeFileSync(mark, '');
      } catch {
        // removed by another run meanwhile
      }
    }
  }
}
