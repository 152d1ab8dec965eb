/**
 * Reading report commits out of the objects a fetch brought (upload-pack.ts): a commit's parent
 * and heartbeat trailer, its status.json and signature, and each report's chain link (hash and
 * sequence). The report index (report-index.ts) keeps what these return.
 */
import type { Report, ReportView } from '../schema/report.js';
import { sha256, type Link } from './chain.js';
import type { GitObject } from './status/git-remote.js';
import { isHeartbeatMessage, SIGNATURE_FILE, STATUS_FILE } from '../core/report/branch.js';
import { commitHeaders } from '../core/git/commit.js';
import { treeEntries } from '../core/git/tree.js';
import type { ReportTexts } from './report-texts.js';

/**
 * The report commit `oid` read from fetched objects: parent, heartbeat, status.json and its
 * signature, with their blob ids (which the report texts keep, to check them when read back).
 */
export function tipOf(objects: Map<string, GitObject>, oid: string): { commit: string; parent: string | null; heartbeat: boolean } & ReportTexts {
  const commit = commitOf(objects, oid);
  // Fields named one by one: a spread is V8's slow path, on status's path for every report.
  const { status, sig, statusId, sigId } = reportFiles(objects, commit?.tree);
  return { commit: oid, parent: commit?.parent ?? null, heartbeat: commit?.heartbeat ?? false, status, sig, statusId, sigId };
}

/** A fetched report commit's parent, and its link (read only when asked for: the chain check walks many commits' parents and needs one link). */
export function linkOf(objects: Map<string, GitObject>, oid: string): { parent: string | null; link: Link | null } | undefined {
  const commit = commitOf(objects, oid);
  if (!commit) return undefined;
  return {
    parent: commit.parent,
    get link() {
      const { status } = reportFiles(objects, commit.tree);
      return status === null ? null : linkOfText(status.toString('utf8'));
    },
  };
}

/**
 * What the report index keeps of a report (ReportView): what status, rollout and the fleet page
 * read. Only the resources that failed or could not be checked, and no owned list, inventory or profile, which would make
 * the index grow with the size of every machine.
 */
export function reportView(report: Report): ReportView {
  const { inventory: _inventory, profile: _profile, owned: _owned, vouch: _vouch, ...rest } = report;
  return { ...rest, resources: report.resources.filter((r) => r.result === 'failed' || r.result === 'unverified') };
}

/** A report's link: the hash of its text and its sequence (read from `report` when it parsed). */
export function linkFromText(text: string, report?: Report | null): Link {
  if (report) return { sha: sha256(text), sequence: report.sequence };
  return linkOfText(text);
}

function linkOfText(text: string): Link {
  let sequence: number | null = null;
  try {
    const n = (JSON.parse(text) as { sequence?: unknown }).sequence;
    if (typeof n === 'number' && Number.isInteger(n)) sequence = n;
  } catch {
    // an unreadable report has no sequence
  }
  return { sha: sha256(text), sequence };
}

/** A fetched report commit's tree, first parent and heartbeat trailer (core/git/commit.ts reads it). */
export function commitOf(objects: Map<string, GitObject>, oid: string): { tree: string; parent: string | null; heartbeat: boolean } | undefined {
  const o = objects.get(oid);
  if (o?.type !== 'commit') return undefined;
  const commit = commitHeaders(o.data);
  if (!commit) return { tree: '', parent: null, heartbeat: false };
  return { tree: commit.tree, parent: commit.parents[0] ?? null, heartbeat: isHeartbeatMessage(commit.message) };
}

/** status.json and its signature in tree `oid`, with their blob ids (as long as the tree's own: SHA-1 or SHA-256). */
function reportFiles(objects: Map<string, GitObject>, oid: string | undefined): Omit<ReportTexts, 'commit'> {
  const files = { status: null as Buffer | null, sig: null as Buffer | null, statusId: null as string | null, sigId: null as string | null };
  const tree = oid === undefined ? undefined : objects.get(oid);
  if (tree?.type !== 'tree') return files;
  for (const e of treeEntries(tree.data, oid!.length / 2)) {
    const blob = objects.get(e.oid);
    if (blob?.type !== 'blob') continue;
    if (e.name === STATUS_FILE) [files.status, files.statusId] = [blob.data, e.oid];
    else if (e.name === SIGNATURE_FILE) [files.sig, files.sigId] = [blob.data, e.oid];
  }
  return files;
}
