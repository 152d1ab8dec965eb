/**
 * Heartbeats in the report history. A report that says nothing new is committed as a heartbeat,
 * marked by a trailer in its commit message (so the mark survives a fresh clone and shows in
 * `git log`). A heartbeat on top of a heartbeat replaces it: history grows with real changes,
 * while the newest heartbeat keeps last contact fresh.
 */
import * as fs from 'node:fs';
import git from 'isomorphic-git';
import { isHeartbeatMessage } from '../../core/report/branch.js';


/** Whether commit `oid` is a heartbeat. */
export async function isHeartbeat(gitdir: string, oid: string): Promise<boolean> {
  const { commit } = await git.readCommit({ fs, gitdir, oid });
  return isHeartbeatMessage(commit.message);
}

/** When the tip `oid` is a heartbeat whose parent is here (a push needs it), the parents its replacement takes; null otherwise. */
export async function replacement(gitdir: string, oid: string): Promise<{ parents: string[] } | null> {
  const { commit } = await git.readCommit({ fs, gitdir, oid });
  if (!isHeartbeatMessage(commit.message) || commit.parent.length > 1) return null;
  for (const p of commit.parent) if (!(await git.readCommit({ fs, gitdir, oid: p }).then(() => true, () => false))) return null;
  return { parents: commit.parent };
}
