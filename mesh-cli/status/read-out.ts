/**
 * Reading a report out for the index: the verdict of a report that needs no signature check, or
 * the job that has a verify thread check it against node.yaml; and node.yaml on main, by blob id,
 * parsed once into the index.
 */
import { hash } from 'node:crypto';
import { yaml } from '../../core/load.js';
import type { IdentityKeys } from '../../core/report/claims.js';
import type { parseReport } from '../../core/report/verify.js';
import { NodeIdentity } from '../../schema/fleet.js';
import { catFiles, type Fleet } from '../fleet.js';
import type { Verdict, VerifyJob } from '../verify-pool.js';
import { parseIdentities, readNodesCache, writeNodesCache, type IndexFile, type TipRecord } from './index-file.js';
import { nodeYamls } from '../layout.js';

/** What a verify thread needs of node.yaml: its generation and token keys. */
function keysOf(identity: NodeIdentity | null | undefined): IdentityKeys | null {
  if (!identity) return null;
  return { generation: identity.generation, ...(identity.token ? { token: { publicKey: identity.token.publicKey } } : {}), ...(identity.previous ? { previous: identity.previous } : {}) };
}

/**
 * A report's verdict when it needs no signature check (no status.json, or one that does not
 * parse: `parsed` is its text parsed), set on `tip`; otherwise the job that verifies its
 * signature against node.yaml `blob`.
 */
export function judge(tip: TipRecord, node: string, { status, sig }: { status: Buffer | null; sig: Buffer | null }, parsed: ReturnType<typeof parseReport> | null, blob: string, identities: IndexFile['identities']): (VerifyJob & { blob: string }) | null {
  if (status === null) setVerdict(tip, blob, { signature: 'missing', reason: 'no status.json on the report branch' });
  else if (!parsed!.ok) setVerdict(tip, blob, { signature: 'invalid', reason: `status.json does not parse: ${parsed!.problems[0]?.message}` });
  else if (blob !== '' && identities[blob] === null) setVerdict(tip, blob, { signature: 'invalid', reason: `${node}'s node.yaml on main does not read as a node's identity, so nothing vouches for this node: 'mesh-cli validate' names its problem` });
  else {
    // Only the claimed fields go to the verify thread: the whole report would be copied across for nothing.
    const { node: named, generation, nodeKey, vouch } = parsed!.value;
    return { node, status, sig, claims: { node: named, generation, nodeKey, vouch }, identity: keysOf(identities[blob]), blob };
  }
  return null;
}

export function setVerdict(tip: TipRecord, blob: string, verdict: Verdict): void {
  tip.identity = blob;
  tip.verdict = verdict;
}

/** Bumped when what readNodeFiles keeps, or how layout.ts places a node.yaml, changes. */
const NODES_CACHE = 'nodes.json 1';

/** Where node.yaml lies on main: each node's node.yaml path (null: its name is in two folders), and its blob id. */
export interface NodeFiles {
  places: Map<string, string | null>;
  ids: Map<string, string>;
}

/**
 * NodeFiles from `listing`, a `git ls-tree -r -z` of nodes/ on main (each entry "mode type
 * oid<TAB>path", NUL-terminated). Read once a run (the index's identities and status's rows both
 * use it), and kept in `cache` by the listing's hash: finding the nodes in the tree took ~0.2 s
 * at 10,000 nodes, and main's nodes/ rarely changes between two runs.
 */
export async function readNodeFiles(listing: Promise<string>, cache: string): Promise<NodeFiles> {
  const text = await listing;
  // The cache's format (and the rules of where a node.yaml lies, layout.ts) in the key: another mesh-cli finds its own answer again.
  const key = hash('sha256', `${NODES_CACHE}\n${text}`);
  const kept = readNodesCache(cache);
  if (kept?.key === key) return { places: new Map(kept.places), ids: new Map(kept.ids) };
  const paths: string[] = [];
  const blobs = new Map<string, string>();
  for (const entry of text.split('\0')) {
    const tab = entry.indexOf('\t');
    if (tab < 0) continue;
    const path = entry.slice(tab + 1);
    paths.push(path);
    const space = entry.lastIndexOf(' ', tab);
    if (path.startsWith('nodes/') && entry.slice(entry.indexOf(' ') + 1, space) === 'blob') blobs.set(path, entry.slice(space + 1, tab));
  }
  const places = await nodeYamls(paths);
  const ids = new Map<string, string>();
  for (const [node, file] of places) {
    const blob = file && blobs.get(file);
    if (blob) ids.set(node, blob);
  }
  writeNodesCache(cache, { key, places: [...places], ids: [...ids] });
  return { places, ids };
}

/**
 * node → blob id of its node.yaml on main (`files`, wherever it sits under nodes/; a node whose
 * name is in two folders has none: the tree is invalid), each blob parsed once into the index,
 * whose parsed node.yaml files are first read from `kept` (the text of identities.json) when
 * given (listed: the index's identities changed).
 */
export async function identityBlobs(files: Promise<NodeFiles>, fleet: Fleet, index: IndexFile, kept: string | undefined): Promise<{ ids: Map<string, string>; listed: boolean }> {
  if (kept !== undefined) index.identities = parseIdentities(kept);
  const { ids } = await files;
  const missing = [...new Set(ids.values())].filter((id) => !(id in index.identities));
  const blobs = missing.length ? await catFiles(fleet.dir, missing) : new Map<string, Buffer | null>();
  const used = new Set(ids.values());
  const unused = Object.keys(index.identities).filter((id) => !used.has(id));
  for (const id of unused) delete index.identities[id];
  for (const id of missing) index.identities[id] = parseIdentity(blobs.get(id)?.toString('utf8'));
  return { ids, listed: missing.length + unused.length > 0 };
}

/** A node.yaml's identity, or null when it is not one; the YAML library is loaded only when a node.yaml is new to the index. */
function parseIdentity(text: string | undefined): NodeIdentity | null {
  try {
    const parsed = NodeIdentity.safeParse(yaml().parse(text ?? '', { uniqueKeys: true }));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

