/** `directory`: one directory with its mode and ownership, or its absence (only when empty). */
import { chmodSync, chownSync, lstatSync, mkdirSync, readdirSync, rmdirSync } from 'node:fs';
import type { DirectoryResource } from '../../schema/declaration.js';
import { MeshError } from '../../core/errors.js';
import { describeOwnership } from './node.js';
import { assertParent, attributeDiff, nodeHandler, normalMode, ownerNeeds } from './node-handler.js';

export const directoryHandler = nodeHandler<DirectoryResource>('directory', {
  withContent: false,
  should: () => 'a directory',
  needs: ownerNeeds,

  diff: attributeDiff,

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
  },

  async prior(_r, observed) {
    return { existed: observed !== null, state: observed };
  },
});
