/**
 * Reading, comparing and restoring filesystem nodes (files, directories, symlinks) under a root.
 * Within one pass, a parent folder already checked to be a real directory is not checked
 * again for every resource beneath it (the pass's caches keep them; a new pass starts with
 * none), and any change here that could turn a directory into a symlink forgets what was checked.
 */
import { chmodSync, chownSync, closeSync, lstatSync, mkdirSync, openSync, readdirSync, readlinkSync, readSync, rmdirSync, symlinkSync, unlinkSync, type Stats } from 'node:fs';
import { join, resolve } from 'node:path';
import type { OwnedRecord } from '../../schema/report.js';
import { writeFileAtomic } from '../atomic.js';
import { MeshError } from '../../core/errors.js';
import { symlinkParent, underRoot } from '../paths.js';
import type { PassCache, ResourceContext } from './handler.js';
import { lookupId, nameOf, type PassScope } from './ownership.js';

/** Forget the folders seen to be real directories in this pass (`realDirs`: real paths; `realChains`: `root\0folder` of whole chains). */
function forgetDirs(pass: PassCache): void {
  pass.realDirs.clear();
  pass.realChains.clear();
}

/** Refuse a machine path whose parent folders include a symlink: a write must never follow one out of the root. */
function assertNoSymlinkParents({ root, pass: { realDirs, realChains } }: PassScope, machinePath: string): void {
  const chain = `${root}\0${machinePath.slice(0, machinePath.lastIndexOf('/'))}`;
  if (realChains.has(chain)) return;
  const parts = machinePath.split('/').filter(Boolean);
  const base = resolve(root);
  let current = base;
  for (const part of parts.slice(0, -1)) {
    current = join(current, part);
    if (realDirs.has(current)) continue;
    let st: Stats;
    try {
      st = lstatSync(current);
    } catch {
      return; // a missing parent cannot be traversed
    }
    if (st.isSymbolicLink()) throw symlinkParent(root, machinePath, current);
    if (!st.isDirectory()) return; // a file as a parent: nothing beneath it can be reached
    realDirs.add(current);
  }
  realChains.add(chain);
}

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

/** The node at machine path `path` under `scope.root`, or null when nothing is there. */
export function readNode(scope: PassScope, path: string, withContent: boolean): NodeState | null {
  assertNoSymlinkParents(scope, path);
  const real = underRoot(scope.root, path);
  let st: Stats | undefined;
  try {
    st = lstatSync(real, { throwIfNoEntry: false });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOTDIR') return null;
    throw e;
  }
  if (!st) return null;
  const kind = st.isFile() ? 'file' : st.isDirectory() ? 'directory' : st.isSymbolicLink() ? 'symlink' : 'other';
  const state: NodeState = {
    kind,
    mode: (st.mode & 0o7777).toString(8).padStart(4, '0'),
    owner: nameOf(scope, 'owner', st.uid),
    group: nameOf(scope, 'group', st.gid),
  };
  if (kind === 'file') state.size = st.size;
  if (kind === 'file' && withContent) state.content = contentOf(scope, real, st).toString('base64');
  if (kind === 'symlink') state.target = readlinkSync(real);
  return state;
}

/**
 * The content of the regular file `real` (lstat `st`): what this pass wrote there when the file is
 * still the one it put in place (the read-back of a write: WriteBatch.written checks the inode,
 * size and modification time against those right after the write, whose data was made durable
 * before the rename), else read from the file.
 */
function contentOf(scope: PassScope, real: string, st: Stats): Buffer {
  const written = scope.pass.writes.written(real, st);
  return written !== undefined ? Buffer.from(written) : readContent(real, st.size);
}

/** The content of the regular file `real`, `size` bytes long when it was just looked at (one syscall fewer than readFileSync). */
function readContent(real: string, size: number): Buffer {
  const fd = openSync(real, 'r');
  try {
    const buf = Buffer.allocUnsafe(size);
    let n = 0;
    for (let got = 1; n < size && got > 0; n += got) got = readSync(fd, buf, n, size - n, null);
    return buf.subarray(0, n);
  } finally {
    closeSync(fd);
  }
}

/** Differences in owner and group between what is declared and what is there. */
export function ownershipDiff(r: { owner?: string; group?: string }, now: NodeState): string[] {
  const changes: string[] = [];
  if (r.owner !== undefined && now.owner !== r.owner) changes.push(`owner ${now.owner} → ${r.owner}`);
  if (r.group !== undefined && now.group !== r.group) changes.push(`group ${now.group} → ${r.group}`);
  return changes;
}

/** The uid and gid a node should get: declared names resolved on the machine, else what it has. */
export function describeOwnership(scope: PassScope, r: { owner?: string; group?: string }, st: Stats): { uid: number; gid: number } {
  return {
    uid: r.owner !== undefined ? lookupId(scope, 'owner', r.owner) : st.uid,
    gid: r.group !== undefined ? lookupId(scope, 'group', r.group) : st.gid,
  };
}

/** Put back what was at a path before the host took it over, or delete what the host created. */
export async function restoreNode(ctx: ResourceContext, record: OwnedRecord): Promise<string | undefined> {
  const path = String(record.resource.path);
  const before = (record.prior?.state ?? null) as NodeState | null;
  const real = underRoot(ctx.root, path);
  const now = readNode(ctx, path, false);
  if (before === null) {
    if (!now) return undefined;
    if (now.kind !== 'directory') {
      unlinkSync(real);
      return undefined;
    }
    if (readdirSync(real).length > 0) return `left ${path} in place: it holds files mesh does not own`;
    rmdirSync(real);
    forgetDirs(ctx.pass);
    return undefined;
  }
  if (now && unchangedSince(before, now, () => readNode(ctx, path, true)?.content)) return `left ${path} as it is: it is what was there before mesh took it over`;
  if (now && now.kind !== before.kind && now.kind !== 'directory') unlinkSync(real);
  if (before.kind === 'file') writeFileAtomic(real, Buffer.from(before.content ?? '', 'base64'), parseInt(before.mode, 8), { faults: ctx.faults });
  if (before.kind === 'directory') mkdirSync(real, { recursive: true });
  if (before.kind === 'symlink' && (!now || now.kind !== 'symlink' || now.target !== before.target)) {
    if (now?.kind === 'symlink') unlinkSync(real);
    forgetDirs(ctx.pass);
    symlinkSync(before.target ?? '', real);
  }
  if (before.kind !== 'symlink') {
    chmodSync(real, parseInt(before.mode, 8));
    chownSync(real, lookupIdOr(ctx, 'owner', before.owner), lookupIdOr(ctx, 'group', before.group));
  }
  return `restored ${path} to what was there before mesh took it over`;
}

/**
 * Whether the node at a path (`now`) is what was there before mesh took it over (`before`): a
 * change that failed before it changed anything (a folder where a file is declared), or one put
 * back by hand. `content` reads a file's bytes, only when all else is equal.
 */
function unchangedSince(before: NodeState, now: NodeState, content: () => string | undefined): boolean {
  const same = (['kind', 'mode', 'owner', 'group', 'target'] as const).every((k) => before[k] === now[k]);
  return same && (before.kind !== 'file' || (before.content ?? '') === (content() ?? ''));
}

function lookupIdOr(scope: PassScope, kind: 'owner' | 'group', name: string): number {
  return /^\d+$/.test(name) ? Number(name) : lookupId(scope, kind, name);
}
