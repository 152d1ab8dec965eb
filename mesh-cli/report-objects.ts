/**
 * Reading report commits out of the objects a fetch brought (upload-pack.ts): a commit's parent
 * and heartbeat trailer, its status.json and signature, and each report's chain link (hash and
 * sequence). The report index (report-index.ts) keeps what these return.
 */
import { Report } from '../schema/report.js';
import { sha256, type Link, type SeenTip } from './chain.js';
import type { GitObject } from './upload-pack.js';

const HEARTBEAT = 'Mesh-Heartbeat: yes';

/** The report commit `oid` read from fetched objects: parent, heartbeat, status.json and its signature. */
export function tipOf(objects: Map<string, GitObject>, oid: string): Omit<SeenTip, 'parentLink'> & { status: string | null; sig: string | null } {
  const commit = commitOf(objects, oid);
  const files = commit ? treeFiles(objects, commit.tree) : new Map<string, string>();
  const status = files.get('status.json') ?? null;
  return { commit: oid, parent: commit?.parent ?? null, heartbeat: commit?.heartbeat ?? false, status, sig: files.get('status.json.sig') ?? null, link: status === null ? null : linkFromText(status) };
}

export function linkOf(objects: Map<string, GitObject>, oid: string): { parent: string | null; link: Link | null } | undefined {
  const commit = commitOf(objects, oid);
  if (!commit) return undefined;
  const status = treeFiles(objects, commit.tree).get('status.json');
  return { parent: commit.parent, link: status === undefined ? null : linkFromText(status) };
}

/** A verified report's text parsed again (the verdict, kept beside it, says whether to trust it); null when it does not parse. */
export function parseReportText(text: string | null): Report | null {
  try {
    const parsed = text === null ? null : Report.safeParse(JSON.parse(text));
    return parsed?.success ? parsed.data : null;
  } catch {
    return null;
  }
}

function linkFromText(text: string): Link {
  let sequence: number | null = null;
  try {
    const n = (JSON.parse(text) as { sequence?: unknown }).sequence;
    if (typeof n === 'number' && Number.isInteger(n)) sequence = n;
  } catch {
    // an unreadable report has no sequence
  }
  return { sha: sha256(text), sequence };
}

export function commitOf(objects: Map<string, GitObject>, oid: string): { tree: string; parent: string | null; heartbeat: boolean } | undefined {
  const o = objects.get(oid);
  if (o?.type !== 'commit') return undefined;
  const text = o.data.toString('utf8');
  const end = text.indexOf('\n\n');
  const head = end < 0 ? text : text.slice(0, end);
  return { tree: /^tree ([0-9a-f]{40})$/m.exec(head)?.[1] ?? '', parent: /^parent ([0-9a-f]{40})$/m.exec(head)?.[1] ?? null, heartbeat: end >= 0 && text.slice(end).includes(HEARTBEAT) };
}

/** The blobs directly in tree `oid`, by name, as text. */
function treeFiles(objects: Map<string, GitObject>, oid: string): Map<string, string> {
  const files = new Map<string, string>();
  const tree = objects.get(oid);
  if (tree?.type !== 'tree') return files;
  for (let at = 0; at < tree.data.length; ) {
    const nul = tree.data.indexOf(0, at);
    const name = tree.data.subarray(tree.data.indexOf(32, at) + 1, nul).toString('utf8');
    const blob = objects.get(tree.data.subarray(nul + 1, nul + 21).toString('hex'));
    if (blob?.type === 'blob') files.set(name, blob.data.toString('utf8'));
    at = nul + 21;
  }
  return files;
}
