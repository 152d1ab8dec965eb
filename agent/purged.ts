/**
 * What `purge: true` directories moved aside: one set per pass that purged, purged/TIME/PATH in
 * the host's state folder (TIME the pass's ISO time, `:` written `-`). Like Puppet's filebucket it
 * keeps what mesh took away; unlike it, not for ever: a set older than KEEP_DAYS is removed at the
 * end of a pass, so a file something puts back into a purged directory again and again cannot fill
 * /var. `mesh-host state` says what is kept.
 */
import { lstatSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { hostPaths } from './paths.js';

/** How long a purged file is kept. */
export const KEEP_DAYS = 30;

/** The folder of the sets, under the root's state folder. */
export function purgedDir(root: string): string {
  return join(hostPaths(root).stateDir, 'purged');
}

/** The folder of the set a purge at `now` adds to. */
export function purgedSet(root: string, now: Date): string {
  return join(purgedDir(root), now.toISOString().replace(/:/g, '-'));
}

/** The sets by name with their time; a folder whose name is not a set's time is none of mesh's and is left alone. */
function sets(root: string): Array<{ name: string; at: Date }> {
  let names: string[];
  try {
    names = readdirSync(purgedDir(root));
  } catch {
    return []; // nothing was ever purged
  }
  return names
    .map((name) => ({ name, at: new Date(name.replace(/^(\d{4}-\d\d-\d\dT\d\d)-(\d\d)-/, '$1:$2:')) }))
    .filter((s) => /^\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{3}Z$/.test(s.name) && !Number.isNaN(s.at.getTime()));
}

/** Remove the sets older than KEEP_DAYS at `now`; returns their names. */
export function prunePurged(root: string, now: Date): string[] {
  const before = now.getTime() - KEEP_DAYS * 86_400_000;
  const old = sets(root).filter((s) => s.at.getTime() < before);
  for (const s of old) rmSync(join(purgedDir(root), s.name), { recursive: true, force: true });
  return old.map((s) => s.name);
}

export interface PurgedKept {
  dir: string;
  files: number;
  bytes: number;
  /** The oldest set's time: it is removed KEEP_DAYS after it. */
  oldest: string;
}

/** What the sets hold, or null when there is none. */
export function keptPurged(root: string): PurgedKept | null {
  const all = sets(root).sort((a, b) => a.at.getTime() - b.at.getTime());
  if (all.length === 0) return null;
  let files = 0;
  let bytes = 0;
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(dir, e.name));
      else {
        files++;
        bytes += lstatSync(join(dir, e.name)).size;
      }
    }
  };
  for (const s of all) walk(join(purgedDir(root), s.name));
  return { dir: purgedDir(root), files, bytes, oldest: all[0]!.at.toISOString() };
}
