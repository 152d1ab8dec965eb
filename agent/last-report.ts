/**
 * The host's last report, read back from its local report branch (report.ts commits each one
 * there before it is pushed). Local files only, so it answers on a machine that cannot reach
 * the fleet, and read-only: `mesh-host state` never changes the git dir it looks at.
 */
import * as fs from 'node:fs';
import git from 'isomorphic-git';
import type { ResourceResult } from '../schema/report.js';
import { treeReader } from './fleet/tree.js';
import { reportRef, STATUS_FILE } from '../core/report/branch.js';

/** The resources the last report of `node` in `gitdir` lists as failed, with their errors; empty when there is none or it cannot be read. */
export async function failedInLastReport(gitdir: string, node: string): Promise<Map<string, string>> {
  try {
    const tip = await git.resolveRef({ fs, gitdir, ref: reportRef(node) });
    const text = await treeReader(gitdir, tip, () => ({})).read(STATUS_FILE);
    return text === null ? new Map() : failedLines(JSON.parse(text));
  } catch {
    return new Map(); // no git dir, no report yet, or one this host cannot read: the report has nothing to add
  }
}

/** The failed lines of a parsed status.json (and the skipped ones: a change not made because what it needs failed), read loosely: only `id`, `result` and `error` matter here. */
function failedLines(report: unknown): Map<string, string> {
  const lines: unknown = (report as { resources?: unknown } | null)?.resources;
  const failed = new Map<string, string>();
  if (!Array.isArray(lines)) return failed;
  for (const line of lines as Array<Partial<ResourceResult> | null>) {
    if ((line?.result === 'failed' || line?.result === 'skipped') && typeof line.id === 'string') failed.set(line.id, typeof line.error === 'string' ? line.error : 'the report gives no reason');
  }
  return failed;
}
