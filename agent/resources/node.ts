/** Reading, comparing and restoring filesystem nodes (files, directories, symlinks) under a root. */
import { chmodSync, chownSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmdirSync, symlinkSync, unlinkSync, type Stats } from 'node:fs';
import type { OwnedRecord } from '../../schema/report.js';
import { writeFileAtomic } from '../atomic.js';
import { underRoot, assertNoSymlinkParents } from '../paths.js';
import type { ResourceContext } from './handler.js';
import { lookupId, nameOf } from './ownership.js';

export interface NodeState extends Record<string, unknown> {
  kind: 'file' | 'directory' | 'symlink' | 'other';
  mode: string;
  owner: string;
  group: string;
  size?: number;
  /** base64, for files when asked. */
  content?: string;
  target?: string;
}

/** The node at machine path `path` under `root`, or null when nothing is there. */
export function readNode(root: string, path: string, withContent: boolean): NodeState | null {
  assertNoSymlinkParents(root, path);
  const real = underRoot(root, path);
  let st: Stats;
  try {
    st = lstatSync(real);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT' || (e as NodeJS.ErrnoException).code === 'ENOTDIR') return null;
    throw e;
  }
  const kind = st.isFile() ? 'file' : st.isDirectory() ? 'directory' : st.isSymbolicLink() ? 'symlink' : 'other';
  const state: NodeState = {
    kind,
    mode: (st.mode & 0o7777).toString(8).padStart(4, '0'),
    owner: nameOf(root, 'owner', st.uid),
    group: nameOf(root, 'group', st.gid),
  };
  if (kind === 'file') state.size = st.size;
  if (kind === 'file' && withContent) state.content = readFileSync(real).toString('base64');
  if (kind === 'symlink') state.target = readlinkSync(real);
  return state;
}

/** Differences in owner and group between what is declared and what is there. */
export function ownershipDiff(r: { owner?: string; group?: string }, now: NodeState): string[] {
  const changes: string[] = [];
  if (r.owner !== undefined && now.owner !== r.owner) changes.push(`owner ${now.owner} → ${r.owner}`);
  if (r.group !== undefined && now.group !== r.group) changes.push(`group ${now.group} → ${r.group}`);
  return changes;
}

/** The uid and gid a node should get: declared names resolved on the machine, else what it has. */
export function describeOwnership(root: string, r: { owner?: string; group?: string }, st: Stats): { uid: number; gid: number } {
  return {
    uid: r.owner !== undefined ? lookupId(root, 'owner', r.owner) : st.uid,
    gid: r.group !== undefined ? lookupId(root, 'group', r.group) : st.gid,
  };
}

/** Put back what was at a path before the host took it over, or delete what the host created. */
export async function restoreNode(ctx: ResourceContext, record: OwnedRecord): Promise<string | undefined> {
  const path = String(record.resource.path);
  const before = (record.prior?.state ?? null) as NodeState | null;
  const real = underRoot(ctx.root, path);
  const now = readNode(ctx.root, path, false);
  if (before === null) {
    if (!now) return undefined;
    if (now.kind !== 'directory') {
      unlinkSync(real);
      return undefined;
    }
    if (readdirSync(real).length > 0) return `left ${path} in place: it holds files mesh does not own`;
    rmdirSync(real);
    return undefined;
  }
  if (now && now.kind !== before.kind && now.kind !== 'directory') unlinkSync(real);
  if (before.kind === 'file') writeFileAtomic(real, Buffer.from(before.content ?? '', 'base64'), parseInt(before.mode, 8));
  if (before.kind === 'directory') mkdirSync(real, { recursive: true });
  if (before.kind === 'symlink' && (!now || now.kind !== 'symlink' || now.target !== before.target)) {
    if (now?.kind === 'symlink') unlinkSync(real);
    symlinkSync(before.target ?? '', real);
  }
  if (before.kind !== 'symlink') {
    chmodSync(real, parseInt(before.mode, 8));
    chownSync(real, lookupIdOr(ctx.root, 'owner', before.owner), lookupIdOr(ctx.root, 'group', before.group));
  }
  return `restored ${path} to what was there before mesh took it over`;
}

function lookupIdOr(root: string, kind: 'owner' | 'group', name: string): number {
  return /^\d+$/.test(name) ? Number(name) : lookupId(root, kind, name);
}
