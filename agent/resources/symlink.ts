/** `symlink`: a link at `path` pointing at `target`, or its absence. Never writes through a symlink. */
import { renameSync, rmSync, symlinkSync, unlinkSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { SymlinkResource } from '../../schema/declaration.js';
import { fsyncDir } from '../atomic.js';
import { MeshError } from '../../core/errors.js';
import { assertNoSymlinkParents } from '../paths.js';
import { readNode, type NodeState } from './node.js';
import { assertParent, nodeHandler } from './node-handler.js';

/** A regular file replaced by a link is kept for restore; larger ones are refused, as for `file`. */
const MAX_PRIOR_BYTES = 1024 * 1024;

export const symlinkHandler = nodeHandler<SymlinkResource>('symlink', {
  withContent: false,
  should: (r) => `a symlink to ${r.target}`,

  diff(r, now) {
    return now.target === r.target ? [] : [`target ${now.target} → ${r.target}`];
  },

  async apply(r, now, real, ctx) {
    assertNoSymlinkParents(ctx.root, r.path);
    if (now && now.kind !== 'symlink' && now.kind !== 'file') {
      throw new MeshError('E_CONFLICT', `${r.path} is a ${now.kind}; mesh replaces only files and symlinks with a symlink`);
    }
    if (r.ensure === 'absent') {
      if (now?.kind === 'file') throw new MeshError('E_CONFLICT', `${r.path} is a file; mesh will not delete a file declared as a symlink`);
      if (now) unlinkSync(real);
      return;
    }
    assertParent(ctx, r.path);
    // Make the link beside its place and rename it over: rename never follows a link, and a crash leaves old or new.
    const tmp = join(dirname(real), `.${basename(real)}.${process.pid}.tmp`);
    rmSync(tmp, { force: true });
    symlinkSync(r.target ?? '', tmp);
    renameSync(tmp, real);
    fsyncDir(dirname(real));
  },

  async prior(r, observed, ctx) {
    const now = observed as NodeState | null;
    if (now?.kind !== 'file') return { existed: now !== null, state: now };
    if ((now.size ?? 0) > MAX_PRIOR_BYTES) {
      throw new MeshError('E_TOO_LARGE', `${r.path} is a file larger than ${MAX_PRIOR_BYTES} bytes; mesh keeps a copy of what it replaces, so move the file away first`);
    }
    return { existed: true, state: readNode(ctx, r.path, true) };
  },
});
