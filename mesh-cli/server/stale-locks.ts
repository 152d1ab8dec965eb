/**
 * Ref locks left behind by a server that was killed while it updated a report branch: git's own
 * `<ref>.lock`, taken by report-receive.ts (or by a receive-pack it started) and renamed over the
 * ref when the update lands. A kill between the two leaves the lock, and every later push of that
 * node's branch is refused as "locked" until someone removes it (git leaves it too). At start,
 * `mesh-cli serve` removes a report branch's lock older than a minute: no update holds one that
 * long, since a push is read whole before its ref is locked.
 */
import { readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { REPORT_REFS } from '../../core/report/branch.js';

/** How old a lock must be to be taken as left behind. */
export const STALE_LOCK_MS = 60_000;

/** Remove the stale report-branch locks of every repository in `data`; returns them as [repository, ref]. */
export function removeStaleLocks(data: string, now = Date.now()): Array<[repo: string, ref: string]> {
  const removed: Array<[string, string]> = [];
  for (const repo of list(data).filter((name) => name.endsWith('.git'))) {
    const dir = join(data, repo, REPORT_REFS);
    for (const name of list(dir).filter((n) => n.endsWith('.lock'))) {
      const file = join(dir, name);
      try {
        if (now - statSync(file).mtimeMs < STALE_LOCK_MS) continue;
        rmSync(file);
        removed.push([repo, `${REPORT_REFS}${name.slice(0, -'.lock'.length)}`]);
      } catch {
        // gone meanwhile, or not ours to remove: git says so at the next push
      }
    }
  }
  return removed;
}

function list(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
