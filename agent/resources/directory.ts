/**
 * `directory`: one directory with its mode and ownership, or its absence (only when empty). With
 * `purge: true` it also holds nothing this node does not declare: every file and link directly in
 * it that no resource names is moved to the host's state folder (purged/TIME/PATH, as Puppet's
 * filebucket keeps what it replaces; agent/purged.ts removes a set after 30 days), never deleted
 * at once; folders (and sockets, pipes, devices) in it are left alone.
 */
import { copyFileSync, chmodSync, chownSync, lstatSync, mkdirSync, readdirSync, readlinkSync, renameSync, rmdirSync, symlinkSync, unlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { DirectoryResource } from '../../schema/declaration.js';
import { MeshError } from '../../core/errors.js';
import { purgedSet } from '../purged.js';
import { describeOwnership } from './node.js';
import { assertParent, attributeDiff, nodeHandler, normalMode, ownerNeeds } from './node-handler.js';
import type { ResourceContext } from './handler.js';

/** Where purged entries go, under the root: the host's state folder (var/lib/mesh-host/purged). */
const PURGED = '/var/lib/mesh-host/purged';

export const directoryHandler = nodeHandler<DirectoryResource>('directory', {
  withContent: false,
  should: () => 'a directory',
  needs: ownerNeeds,

  diff(r, now) {
    const undeclared = (now.undeclared ?? []) as string[];
    const shown = undeclared.slice(0, 5).join(', ') + (undeclared.length > 5 ? ` and ${undeclared.length - 5} more` : '');
    return [...attributeDiff(r, now), ...(undeclared.length > 0 ? [`purge: ${shown} ${undeclared.length === 1 ? 'is' : 'are'} not declared (moved to ${PURGED}/)`] : [])];
  },

  observe: (r, now, real, ctx) => (r.purge && now.kind === 'directory' ? { undeclared: undeclaredIn(r.path, real, ctx) } : {}),

  async apply(r, now, real, ctx) {
    if (r.ensure === 'absent') {
      if (!now) return;
      if (now.kind !== 'directory') throw new MeshError('E_CONFLICT', `${r.path} is a ${now.kind}, not a directory`);
      const held = readdirSync(real).sort();
      if (held.length > 0) {
        const named = held.slice(0, 3).map((n) => `${r.path.replace(/\/$/, '')}/${n}`).join(', ') + (held.length > 3 ? ` and ${held.length - 3} more` : '');
        throw new MeshError('E_NOT_EMPTY', `${r.path} is not empty (${named}); mesh removes only empty directories: declare what it holds absent too, or remove it by hand`);
      }
      rmdirSync(real);
      return;
    }
    if (now && now.kind !== 'directory') throw new MeshError('E_CONFLICT', `${r.path} is a ${now.kind}, not a directory: remove it or declare it as what it is`);
    assertParent(ctx, r.path);
    const mode = parseInt(normalMode(r.mode ?? now?.mode ?? '0755'), 8);
    if (!now) mkdirSync(real, { mode });
    chmodSync(real, mode);
    const { uid, gid } = describeOwnership(ctx, r, lstatSync(real));
    chownSync(real, uid, gid);
    if (r.purge) purge(r.path, real, ctx);
  },

  async prior(_r, observed) {
    return { existed: observed !== null, state: observed };
  },
});

/** The files and links directly in the directory `path` (at `real`) that the pass does not declare, by name; a write of mesh's own under way is not one. */
function undeclaredIn(path: string, real: string, ctx: ResourceContext): string[] {
  const base = path.replace(/\/$/, '');
  return readdirSync(real, { withFileTypes: true })
    .filter((e) => (e.isFile() || e.isSymbolicLink()) && !ctx.pass.declared.has(`${base}/${e.name}`) && !/^\..*\.mesh-tmp$/.test(e.name))
    .map((e) => e.name)
    .sort();
}

/** Move what `path` holds and the pass does not declare to purged/TIME/PATH in the state folder (copied and removed across filesystems). */
function purge(path: string, real: string, ctx: ResourceContext): void {
  const names = undeclaredIn(path, real, ctx);
  if (names.length === 0) return;
  const keep = join(purgedSet(ctx.root, ctx.now()), path);
  mkdirSync(keep, { recursive: true, mode: 0o700 });
  for (const name of names) moveAside(join(real, name), join(keep, name));
}

function moveAside(from: string, to: string): void {
  try {
    renameSync(from, to);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EXDEV') throw e;
    mkdirSync(dirname(to), { recursive: true });
    if (lstatSync(from).isSymbolicLink()) symlinkSync(readlinkSync(from), to);
    else copyFileSync(from, to);
    unlinkSync(from);
  }
}

