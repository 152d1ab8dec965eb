/** `directory`: one directory with its mode and ownership, or its absence (only when empty). */
import { chmodSync, chownSync, lstatSync, mkdirSync, readdirSync, rmdirSync } from 'node:fs';
import type { DirectoryResource } from '../../schema/declaration.js';
import { MeshError } from '../../core/errors.js';
import { underRoot } from '../paths.js';
import { normalMode } from './file.js';
import type { Handler } from './handler.js';
import { describeOwnership, ownershipDiff, readNode, restoreNode, type NodeState } from './node.js';

export const directoryHandler: Handler<DirectoryResource> = {
  async read(r, ctx) {
    return readNode(ctx.root, r.path, false);
  },

  diff(r, observed) {
    const now = observed as NodeState | null;
    if (r.ensure === 'absent') return now ? [`${now.kind} exists, should be absent`] : [];
    if (!now) return ['absent, should be a directory'];
    if (now.kind !== 'directory') return [`is a ${now.kind}, should be a directory`];
    const changes: string[] = [];
    if (r.mode !== undefined && now.mode !== normalMode(r.mode)) changes.push(`mode ${now.mode} → ${normalMode(r.mode)}`);
    changes.push(...ownershipDiff(r, now));
    return changes;
  },

  async apply(r, observed, ctx) {
    const real = underRoot(ctx.root, r.path);
    const now = observed as NodeState | null;
    if (r.ensure === 'absent') {
      if (!now) return;
      if (now.kind !== 'directory') throw new MeshError('E_CONFLICT', `${r.path} is a ${now.kind}, not a directory`);
      if (readdirSync(real).length > 0) throw new MeshError('E_NOT_EMPTY', `${r.path} is not empty; mesh removes only empty directories`);
      rmdirSync(real);
      return;
    }
    if (now && now.kind !== 'directory') throw new MeshError('E_CONFLICT', `${r.path} is a ${now.kind}, not a directory: remove it or declare it as what it is`);
    const parent = readNode(ctx.root, r.path.slice(0, r.path.lastIndexOf('/')) || '/', false);
    if (parent?.kind !== 'directory') {
      throw new MeshError('E_NO_PARENT', `the parent directory of ${r.path} does not exist: declare it as a directory resource before this one`);
    }
    const mode = parseInt(normalMode(r.mode ?? now?.mode ?? '0755'), 8);
    if (!now) mkdirSync(real, { mode });
    chmodSync(real, mode);
    const { uid, gid } = describeOwnership(ctx.root, r, lstatSync(real));
    chownSync(real, uid, gid);
  },

  async prior(_r, observed) {
    return { existed: observed !== null, state: observed };
  },

  async remove(record, ctx) {
    return restoreNode(ctx, record);
  },
};
