/**
 * Who may push what to a fleet repository, decided once for every git server: `mesh-cli serve`
 * applies these rules in-process, `mesh-cli hook` applies them inside any other git server
 * (Apache + `git http-backend`, gitolite, Gitea/Forgejo, GitLab; docs/servers.md).
 *
 * - An operator may push anything, force-pushes included, except deleting the fleet's main
 *   branch (HEAD), which every host polls.
 * - A node may push only its own report branch, refs/heads/reports/<node>, non-fast-forward
 *   allowed (a heartbeat replaces the heartbeat before it), and delete nothing. Its new commits
 *   hold no file over MAX_REPORT_FILE, and an enrolment report uses its token once per
 *   (node, generation): the first one is recorded where nothing pushed can undo it.
 * - Anyone else pushes nothing.
 *
 * The ref rules are pure; the commit checks read objects through PushReader and record
 * enrolments through EnrolmentRecords, which each server provides.
 */
import { reportRef } from '../report/branch.js';

/** The largest file a report commit may hold (status.json, its signature): 1 MiB; a host's report is a few kB. */
export const MAX_REPORT_FILE = 1024 * 1024;

/** Who pushes, as the newest trusted main and the operators list name them. */
export type Pusher =
  | { user: string; role: 'operator' }
  | { user: string; role: 'node'; generation: number }
  | { user: string; role: 'unknown' };

/** One ref update of a push: git's "old new ref" line. */
export interface RefUpdate {
  old: string;
  new: string;
  ref: string;
}

/** Whether `update` deletes its ref (the new id is all zeros). */
export function isDeletion(update: RefUpdate): boolean {
  return /^0+$/.test(update.new);
}

/** The role of `user`: an operator when listed, a node when the trusted main names it (`generation`: its node.yaml's), else unknown. */
export function pusherOf(user: string, isOperator: boolean, nodeGeneration: number | null): Pusher {
  if (isOperator) return { user, role: 'operator' };
  if (nodeGeneration !== null) return { user, role: 'node', generation: nodeGeneration };
  return { user, role: 'unknown' };
}

/** Why `who` may not make `update` (a "mesh: …" line for the pusher), or null when the ref rules allow it. `main` is the full ref HEAD names. */
export function refusedRef(who: Pusher, update: RefUpdate, main: string | null): string | null {
  switch (who.role) {
    case 'operator':
      return isDeletion(update) && update.ref === main ? `mesh: ${update.ref} is the fleet's main branch; it cannot be deleted` : null;
    case 'node':
      if (update.ref !== reportRef(who.user)) return `mesh: node ${who.user} may push only ${reportRef(who.user)}, not ${update.ref}`;
      if (isDeletion(update)) return `mesh: node ${who.user} may not delete its report branch`;
      return null;
    default:
      return `mesh: push refused: ${who.user || 'an anonymous user'} is neither an operator nor a node of this fleet`;
  }
}

/** Every refusal of the ref rules for a whole push, in the order of its updates. */
export function refusedRefs(who: Pusher, updates: RefUpdate[], main: string | null): string[] {
  return updates.map((u) => refusedRef(who, u, main)).filter((m): m is string => m !== null);
}

/** Reads a pushed commit's objects (inside the push's quarantine, when the server has one). */
export interface PushReader {
  /** The commits reachable from `tip` that the pusher could not already see (main, its own branch). */
  newCommits(tip: string): Promise<string[]>;
  /** Every file of `commit`'s tree with its size. */
  files(commit: string): Promise<Array<{ path: string; size: number }>>;
  /** The text of `commit:status.json`, or null when it has none. */
  statusJson(commit: string): Promise<string | null>;
}

/** Where the first enrolment of each (node, generation) is recorded, out of reach of any push. */
export interface EnrolmentRecords {
  /** Record it; `first: false` (with the first one's time, when known) when it was recorded before. */
  claim(node: string, generation: number): Promise<{ first: true } | { first: false; at: string | null }>;
}

/** Why a node's push of `tip` is refused (a "mesh: …" line), or null: no file over the cap, and a token enrols once. */
export async function refusedNodePush(who: Pusher & { role: 'node' }, tip: string, reader: PushReader, records: EnrolmentRecords): Promise<string | null> {
  let enrolment = false;
  for (const commit of await reader.newCommits(tip)) {
    const big = (await reader.files(commit)).find((f) => f.size > MAX_REPORT_FILE);
    if (big) return `mesh: report ${commit} of ${who.user} holds ${big.path} (${big.size} bytes), over the limit of ${MAX_REPORT_FILE} bytes per file; the push is refused`;
    enrolment ||= isEnrolment(await reader.statusJson(commit));
  }
  if (!enrolment) return null;
  const claimed = await records.claim(who.user, who.generation);
  if (claimed.first) return null;
  return `mesh: the token of ${who.user} generation ${who.generation} was already used: it enrolled a machine at ${claimed.at ?? 'an earlier time'}. A token enrols one machine once; issue a new one with 'mesh-cli token issue ${who.user}'`;
}

/** Whether a status.json is an enrolment report (its top-level kind). */
function isEnrolment(text: string | null): boolean {
  if (text === null) return false;
  try {
    return (JSON.parse(text) as { kind?: unknown } | null)?.kind === 'enrolment';
  } catch {
    return false;
  }
}
